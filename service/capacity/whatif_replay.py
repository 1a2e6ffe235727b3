"""The what-if replay (`trainjobs queue simulate`, docs/queue.md): past jobs, each arriving at its
submit time and running its real duration, through the controller's own scheduler, pass after pass,
on a virtual clock that jumps from one event to the next (an arrival, an end). No database, no
backend, no wall clock: a week of a busy backend replays in seconds.

Every pass is scheduling.scheduler.schedule() with the Policy the controller uses (built from the
same settings by the caller), so the replay follows the rules as they are written, once. What it
does not play (docs/queue.md says so): a pass sees an end at the next multiple of the controller's
pass interval, as the controller does, but submits are seen on that grid too; a preempted job stops
at once (as the sim backend's timer does) and its next attempt runs what it had left (the trainer
resumes from its checkpoint); team limits and budgets, retry backoffs and the per-team window of
TRAINJOBS_SCHEDULER_MAX_WAITING are not played."""
from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from service.capacity.snapshot import arbitrated
from service.scheduling.model import SLOT, JobId, Policy, Resources, Running, Share, Waiting
from service.scheduling.scheduler import schedule

# A preemption frees capacity at once: the pass runs again at the same instant. A pass that keeps
# preempting at one instant is a bug of the rules, not a workload; this bounds it, then time moves on.
_PASSES_AT_ONE_INSTANT = 100


@dataclass(frozen=True)
class PastJob:
    """One job as it happened: its team, priority, what it held, when it was submitted and how long
    it ran (all its attempts together), in seconds."""
    job_id: JobId
    team: str
    priority: int
    may_preempt: bool
    demand: Mapping[str, int]
    submitted: float
    duration: float


@dataclass(frozen=True)
class World:
    """What the replay runs under: the capacity (the operator's resources), the team shares, the
    backend's launch slots (None: no limit)."""
    capacity: Mapping[str, int]
    shares: Mapping[str, Share]
    slots: int | None = None


class TooLong(Exception):
    """The replay spent its CPU budget; `reached` is the simulated time it got to."""

    def __init__(self, reached: float) -> None:
        super().__init__(reached)
        self.reached = reached


def replay(jobs: Iterable[PastJob], world: World, policy: Policy, *, max_preemptions_per_job: int,
           deadline: float = math.inf) -> dict[JobId, float]:
    """When each job first started in the replay (a job never started is not in the answer).
    `deadline`: this thread's CPU time (time.thread_time()) past which TooLong is raised."""
    return _Replay(list(jobs), world, policy, max_preemptions_per_job, deadline).run()


class _Replay:
    def __init__(self, jobs: list[PastJob], world: World, policy: Policy, max_preemptions: int,
                 deadline: float) -> None:
        self.capacity: Resources = world.capacity if world.slots is None else {**world.capacity, SLOT: world.slots}
        slot = {SLOT: 1} if world.slots is not None else {}
        self.demand = {j.job_id: {**arbitrated(j.demand, world.capacity), **slot} for j in jobs}
        self.shares, self.policy, self.max_preemptions, self.deadline = world.shares, policy, max_preemptions, deadline
        self.jobs = {j.job_id: j for j in jobs}
        self.arrivals = sorted(jobs, key=lambda j: (j.submitted, str(j.job_id)), reverse=True)  # pop() = next
        self.waiting: dict[JobId, Waiting] = {}
        self.running: dict[JobId, Running] = {}
        self.ends: list[tuple[float, str, JobId]] = []      # (end, id as text, id): a heap; stale after a preemption
        self.end_of: dict[JobId, float] = {}
        self.used: dict[str, int] = {}                       # what the running jobs hold
        self.left = {j.job_id: max(0.0, j.duration) for j in jobs}
        self.preempted: dict[JobId, int] = {}
        self.served: dict[str, float] = {}
        self.first: dict[JobId, float] = {}

    def run(self) -> dict[JobId, float]:
        t = self._on_grid(self.arrivals[-1].submitted) if self.arrivals else None
        while t is not None:
            if time.thread_time() > self.deadline:
                raise TooLong(t)
            changed = self._arrive(t) | self._end(t)
            for _ in range(_PASSES_AT_ONE_INSTANT if changed else 0):
                if not self._pass(t):
                    break
            t = self._next()
        return self.first

    def _on_grid(self, at: float) -> float:
        """The controller's pass that sees something happening at `at`."""
        step = self.policy.pass_s
        return math.ceil(at / step) * step if step > 0 else at

    def _arrive(self, t: float) -> bool:
        """Queues the jobs submitted by `t`; True when one of them may start or preempt now. The last
        pass started every job that fitted: a new job that fits nowhere and may preempt nobody changes
        nothing (the pass over a backlog of thousands is the replay's whole cost)."""
        may_change = False
        while self.arrivals and self.arrivals[-1].submitted <= t:
            job = self.arrivals.pop()
            demand = self.demand[job.job_id]
            self.waiting[job.job_id] = Waiting(job.job_id, job.team, job.priority, demand, job.submitted,
                                               may_preempt=job.may_preempt)
            may_change = may_change or job.may_preempt or self._free(demand) or bool(self._nominal(job.team))
        return may_change

    def _nominal(self, team: str) -> Resources:
        share = self.shares.get(team)
        return share.nominal if share is not None else {}

    def _free(self, demand: Resources) -> bool:
        return all(self.used.get(r, 0) + n <= self.capacity.get(r, 0) for r, n in demand.items() if r in self.capacity)

    def _hold(self, demand: Resources, sign: int) -> None:
        for r, n in demand.items():
            self.used[r] = self.used.get(r, 0) + sign * n

    def _end(self, t: float) -> bool:
        """Removes the jobs that ended by `t`; True when one did (capacity freed)."""
        ended = False
        while self.ends and self.ends[0][0] <= t:
            end, _, job_id = heapq.heappop(self.ends)
            if self.end_of.get(job_id) == end:
                self._hold(self.running.pop(job_id).demand, -1)
                del self.end_of[job_id]
                ended = True
        return ended

    def _pass(self, t: float) -> bool:
        """One controller pass at `t`; True when it preempted (capacity freed: pass again)."""
        if not self.waiting:
            return False
        d = schedule(self.capacity, self.shares, list(self.running.values()), list(self.waiting.values()), t,
                     self.policy, explain=False, served=self.served)
        for a in d.admit:
            self._start(self.waiting.pop(a.job_id), t)
        for p in d.preempt:
            self._stop(p.job_id, t)
            if p.for_job in self.waiting:
                self.waiting[p.for_job] = replace(self.waiting[p.for_job], nominated=True)
        return bool(d.preempt)

    def _start(self, w: Waiting, t: float) -> None:
        job_id = w.job_id
        self.first.setdefault(job_id, t)
        self.served[w.team] = t
        self.running[job_id] = Running(job_id, w.team, w.priority, w.demand, t,
                                       preemptible=self.preempted.get(job_id, 0) < self.max_preemptions)
        self._hold(w.demand, 1)
        end = self.end_of[job_id] = t + self.left[job_id]
        heapq.heappush(self.ends, (end, str(job_id), job_id))

    def _stop(self, job_id: JobId, t: float) -> None:
        """A preempted job stops now and queues again with its first attempt's age, to run what it had left."""
        self._hold(self.running.pop(job_id).demand, -1)
        self.left[job_id] = max(0.0, self.end_of.pop(job_id) - t)
        self.preempted[job_id] = self.preempted.get(job_id, 0) + 1
        job = self.jobs[job_id]
        self.waiting[job_id] = Waiting(job_id, job.team, job.priority, self.demand[job_id], job.submitted,
                                       may_preempt=job.may_preempt)

    def _next(self) -> float | None:
        """The next pass at which something happens (an arrival, an end); None: nothing will, the rest
        wait for ever. A job crossing the starvation limit is no event: it starts nothing then, it
        keeps capacity for itself at the passes after (an end), which see the time."""
        candidates = [self.arrivals[-1].submitted] if self.arrivals else []
        if self.ends:
            candidates.append(self.ends[0][0])
        return self._on_grid(min(candidates)) if candidates else None   # after t: the pops saw to it
