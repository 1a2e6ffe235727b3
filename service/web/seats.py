"""Fair request seats: which waiting request runs next when every seat of a process is taken.

A process runs at most TRAINJOBS_MAX_CONCURRENT_REQUESTS requests at once (its seats,
service/web/overload.py). They used to be handed out in arrival order, so eight members
reading back to back held every seat and the GIL, and another team's GET waited behind all of
their queued reads and then shared the GIL with them: 10x its idle latency (bench/queue_scale.py).

Now the waiters are ordered by start-time fair queuing (Goyal et al., SFQ; the fair queuing of
Kubernetes' API Priority and Fairness), one flow per team:
- each team's waiting requests queue in arrival order; the first of them is tagged with
  start = max(clock, the team's finish), and seating it moves the team's finish on by what its
  requests cost (a moving average of the seconds they held a seat, corrected to the real
  seconds when each ends, so the next of its requests is tagged by what this one really took);
- a freed seat goes to the team whose first waiting request has the smallest start; the clock
  is the start of the last request seated.
So a team reading back to back moves its own finish ahead of the clock by each read's cost, and
a team that asks now and then (its finish long passed) is seated before all of them: it waits only
for a seat to free. No team can take more than its turn by sending more, and an idle process
seats everyone at once, as before (nothing is reserved, nothing is lost).

The flow: a request counts against its credential's team (overload.caller_of: a hash of the
bearer token, or of the UI's session cookie), as a route of this process last authenticated it
(service/auth/deps.py, service/ui: `learn`), so a team's many tokens are one flow. Credentials not
yet authenticated here (a member's first request, and every made-up token) share one flow: a flood
of made-up tokens takes one turn, not one per token. The credentials learned are remembered, the
oldest learned out past TRAINJOBS_AUTH_CACHE_SIZE (the token cache's size). A flow is forgotten
once it has nothing waiting or running and its finish has fallen behind the clock (it would start
from the clock anyway): the flows kept are bounded by the requests in the process."""
from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import OrderedDict, deque

FIRST_COST = 0.005   # seconds a flow's first request is assumed to cost, until one has been measured
SMOOTHING = 0.2      # weight of the newest request in a flow's cost
UNKNOWN = b"unknown"  # the flow of credentials not yet authenticated here


class Flow:
    __slots__ = ("key", "finish", "cost", "active", "waiting", "tag")

    def __init__(self, key: bytes, clock: float) -> None:
        self.key = key
        self.finish = clock
        self.cost = FIRST_COST
        self.active = 0              # its requests waiting or seated
        self.waiting: deque[tuple[asyncio.Future, Ticket]] = deque()
        self.tag: float | None = None          # its entry in the heap (None: none)


class Ticket:
    """A seated (or waiting) request: its flow, and the cost its seating assumed."""
    __slots__ = ("flow", "assumed")

    def __init__(self, flow: Flow) -> None:
        self.flow, self.assumed = flow, 0.0


def _time_out(fut: asyncio.Future) -> None:
    if not fut.done():           # not seated meanwhile
        fut.set_result(False)


class FairSeats:
    def __init__(self, seats: int, remember: int = 10_000) -> None:
        self.seats = seats
        self.remember = remember
        self.busy = 0
        self.queued = 0                           # requests waiting for a seat
        self.clock = 0.0
        self.flows: dict[bytes, Flow] = {}
        self.teams: OrderedDict[bytes, bytes] = OrderedDict()   # credential -> its team's flow key
        self._heads: list[tuple[float, int, Flow]] = []   # each flow with waiters, by its next start
        self._order = itertools.count()

    def knows(self, credential: bytes, team: str) -> bool:
        return self.teams.get(credential) == b"team\0" + team.encode()

    def learn(self, credential: bytes, team: str) -> None:
        """`credential` (overload.caller_of) belongs to `team`: its next requests are the team's."""
        self.teams[credential] = b"team\0" + team.encode()
        self.teams.move_to_end(credential)
        while len(self.teams) > self.remember:
            self.teams.popitem(last=False)

    def _flow(self, key: bytes) -> Flow:
        flow = self.flows.get(key)
        if flow is None:
            flow = self.flows[key] = Flow(key, self.clock)
        return flow

    async def acquire(self, credential: bytes, timeout: float) -> Ticket | None:
        """A seat for a request of `credential`, waiting at most `timeout` seconds (None: none came)."""
        flow = self._flow(self.teams.get(credential, UNKNOWN))
        ticket = Ticket(flow)
        flow.active += 1
        if self.busy < self.seats and not self.queued:
            self._seat(ticket, max(self.clock, flow.finish))
            return ticket
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        flow.waiting.append((fut, ticket))
        self.queued += 1
        if flow.tag is None:
            self._push(flow)
        timer = loop.call_later(timeout, _time_out, fut)
        try:
            seated = await fut
        except asyncio.CancelledError:     # the client went away while it waited
            if fut.done() and not fut.cancelled() and fut.result():
                self.release(ticket, 0.0)
            else:
                if not fut.done():
                    fut.cancel()
                self._gave_up(ticket)
            raise
        finally:
            timer.cancel()
        if not seated:
            self._gave_up(ticket)
            return None
        return ticket

    def release(self, ticket: Ticket, seconds: float) -> None:
        """The request of `ticket` ended after holding its seat `seconds`: its flow's next start
        counts what it really cost, and its seat goes to the flow whose next start is smallest."""
        flow = ticket.flow
        flow.finish += seconds - ticket.assumed
        flow.cost += SMOOTHING * (seconds - flow.cost)
        flow.active -= 1
        self.busy -= 1
        if flow.tag is not None:           # its next request's start moved with it
            self._push(flow)
        self._seat_next()
        self._forget(flow)

    def _seat(self, ticket: Ticket, start: float) -> None:
        flow = ticket.flow
        ticket.assumed = flow.cost
        flow.finish = start + flow.cost
        self.busy += 1
        self.clock = max(self.clock, start)

    def _push(self, flow: Flow) -> None:
        flow.tag = max(self.clock, flow.finish)
        heapq.heappush(self._heads, (flow.tag, next(self._order), flow))

    def _gave_up(self, ticket: Ticket) -> None:
        """A waiting request left before it was seated: it cost its flow nothing (its entry is
        dropped when its flow's turn comes)."""
        ticket.flow.active -= 1
        self.queued -= 1
        self._forget(ticket.flow)

    def _seat_next(self) -> None:
        while self.busy < self.seats and self._heads:
            tag, _, flow = heapq.heappop(self._heads)
            if flow.tag != tag:            # an older entry of a flow pushed again since
                continue
            while flow.waiting and flow.waiting[0][0].done():   # timed out or gone
                flow.waiting.popleft()
            if not flow.waiting:
                flow.tag = None
                continue
            fut, ticket = flow.waiting.popleft()
            fut.set_result(True)
            self.queued -= 1
            self._seat(ticket, tag)
            flow.tag = None
            if flow.waiting:
                self._push(flow)

    def _forget(self, flow: Flow) -> None:
        if flow.active == 0 and flow.finish <= self.clock and self.flows.get(flow.key) is flow:
            self._drop(flow)
        # Flows that went quiet ahead of the clock are swept once they outnumber the requests in
        # the process (plus a margin) twice over: each sweep at least halves them, so it costs
        # O(1) a request, and what is kept stays bounded by the requests, not the credentials seen.
        if len(self.flows) > 2 * (self.busy + self.queued) + 64:
            for old in [f for f in self.flows.values() if f.active == 0 and f.finish <= self.clock]:
                self._drop(old)
            if len(self.flows) > 2 * (self.busy + self.queued) + 64:   # quiet, but ahead: all idle now
                for old in [f for f in self.flows.values() if f.active == 0]:
                    self._drop(old)

    def _drop(self, flow: Flow) -> None:
        del self.flows[flow.key]
        flow.tag = None
        flow.waiting.clear()
