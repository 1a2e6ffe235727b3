"""One admission pass over one backend's capacity: which waiting jobs start, which running
jobs are preempted for them, and where every other waiting job stands and why.

Order, by tiers (scheduling/tiers.py, the one place these rules are written): first the jobs for
which jobs were preempted (so each preemption ends in the start it was made for). Then the jobs
that keep their team inside its nominal quota (the guarantee), wherever they stand in their team's
queue. Then the jobs that waited past Policy.starve_after_s, oldest first. Each of these keeps the
capacity that is free for it, so capacity accrues to it as running jobs end. Then the rest.
Between teams by fair share (the team that borrows least beyond its nominal quota, weighted,
goes first; then the smallest dominant share, Ghodsi et al.'s DRF, launch slots counted as a
resource; each with its past use, the usage ledger; then the fewest jobs running), then the team
served least recently (its last start on this backend: with one launch slot, teams take turns),
then the oldest waiting job: never a team's name. Within a team by priority, then age. The first
Policy.reservations jobs that do not fit keep what frees (Slurm's backfill reservation); past
them a job that does not fit holds back nobody: the next one is tried. Strict
first-come-first-served is gone on purpose.

Pure: the same inputs give the same decision. Times are seconds on any one clock."""
from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Generic

from service.scheduling.estimate import estimate_starts
from service.scheduling.explain import waiting_why
from service.scheduling.ledger import Ledger, borrowed_jobs
from service.scheduling.model import (
    Admitted,
    Decision,
    Id,
    Policy,
    Preempted,
    Queued,
    Resources,
    Running,
    Share,
    Waiting,
    quota_part,
)
from service.scheduling.tiers import TIERS, Scene, tiers_of
from service.scheduling.victims import choose_victims


def schedule(capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running[Id]],
             waiting: Sequence[Waiting[Id]], now: float, policy: Policy = Policy(), *, explain: bool = True,
             served: Mapping[str, float] | None = None, usage: Mapping[str, float] | None = None) -> Decision[Id]:
    """explain=False: `queue` stays empty (no positions, reasons or start estimates): the
    controller acts on `admit` and `preempt` alone, and with 10,000 waiting jobs the words and
    estimates cost more than the decision (GET /v1/queue computes them, cached).
    served: each team's last start on this backend (a team not named was never served), the
    tie-break between teams that stand alike now. usage: each team's decayed use over every
    backend (any one unit; None: no history), fair share's memory (Ledger.fair_key)."""
    return _Pass(capacity, shares, running, waiting, now, policy, served or {}, usage).run(explain)


class _Pass(Generic[Id]):
    def __init__(self, capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running[Id]],
                 waiting: Sequence[Waiting[Id]], now: float, policy: Policy, served: Mapping[str, float],
                 usage: Mapping[str, float] | None = None) -> None:
        self.ledger = Ledger(capacity, shares, running, usage)
        self.running, self.waiting, self.now, self.policy = running, waiting, now, policy
        self.served = dict(served)   # a start in this pass serves its team now
        self.borrowed = borrowed_jobs(running, shares)
        self.stopping_for: dict[Id, int] = {}
        for job in running:
            if job.stopping and job.stopping_for is not None:
                self.stopping_for[job.stopping_for] = self.stopping_for.get(job.stopping_for, 0) + 1
        self.taken: set[Id] = set()
        self.decision: Decision[Id] = Decision()
        # Memos keyed on the ledger's version, which every change to it bumps: (team, demand) ->
        # the version at which such a job could not start; and each kind's fair key at a version.
        self.hopeless: dict[tuple, int] = {}
        self.starved: dict[tuple, int] = {}      # (team, demand) -> version at which such an urgent job kept nothing
        self.keys: dict[tuple, tuple] = {}
        self.left: list[tuple[Waiting[Id], str]] = []       # still waiting, with what the pass did for it
        self.reservations = policy.reservations              # left to give this pass (see _consider)
        self.parking = True    # see _fair_order (False: every job looked at, the reference in the tests)

    def run(self, explain: bool = True) -> Decision[Id]:
        """The tiers in order (scheduling/tiers.py): a job is taken in the first tier that holds it,
        asked when the pass reaches that tier and again just before the job is looked at (a start
        in the tier may have moved it out: its team is at its nominal quota now)."""
        scene = Scene(self.ledger, self.stopping_for, self.now, self.policy)
        tiers = tiers_of(self.policy)
        left = list(self.waiting)
        for tier in tiers:
            # What is left was held by no earlier tier when the pass reached it.
            mine: list[Waiting[Id]] = []
            if tier is tiers[-1]:
                mine, left = left, []
            else:
                rest: list[Waiting[Id]] = []
                for j in left:
                    (mine if tier.holds(j, scene) else rest).append(j)
                left = rest
            if not mine:
                continue
            order = sorted(mine, key=_by_age) if tier.by_age else \
                self._fair_order(mine, park=self.parking and not explain and tier is TIERS[-1])
            for job in order:
                if not tier.holds(job, scene):
                    # No longer in this tier as things stand now: a team below its nominal quota had
                    # every job that fits in it in the nominal tier, and took the whole backend ahead
                    # of the fair order, far beyond its quota. It goes on in a later tier.
                    left.append(job)
                    continue
                self._consider(job, urgent=tier.urgent(job, scene))
        if not explain:
            return self.decision
        ahead = [job for job, _ in self.left]
        starts = estimate_starts(self.ledger.capacity, self._ending(), self.decision.admit, ahead, self.waiting,
                                 self.now, self.policy.estimate_limit)
        said: dict[tuple, str] = {}                        # why in words, as things stand after the pass
        for i, (job, note) in enumerate(self.left):
            key = job.kind
            why = said.get(key)
            if why is None:
                why = said[key] = waiting_why(self.ledger, job)
            why = f"{note}; {why}" if note else why
            self.decision.queue.append(Queued(job.job_id, job.team, i + 1, with_place(why, i), i,
                                              starts.get(job.job_id), reason=why))
        return self.decision

    def _ending(self) -> list[Running[Id]]:
        """The running jobs as the estimates see them: one preempted on this pass has stopped
        within the grace period at the latest."""
        soon = self.now + self.policy.grace_s
        out = []
        for job in self.running:
            if job.job_id in self.taken and (job.expected_end is None or job.expected_end > soon):
                job = replace(job, expected_end=soon)
            out.append(job)
        return out

    def _fair_order(self, jobs: Sequence[Waiting[Id]], park: bool = False):
        """Yields jobs team by team, always from the team that is furthest below its share now
        (re-read after every start, since a start moves its team's share).

        `park` (the fair tier, no words asked: its jobs are never urgent and always in it): a team
        whose next jobs are all of one kind that cannot preempt, a kind that could not start as
        the ledger stands (the `hopeless` memo), leaves the heap while the ledger does not change:
        each of them would only wait (_consider's first test), so 10,000 waiting jobs of 50 teams
        at their limits cost 50 looks, not 10,000. Once the ledger changes (after the job popped
        with key k), a parked team's jobs whose key is below k are the ones the heap would have
        yielded before it: they wait; the team comes back with the key it had (a key is computed
        when its team is pushed, as before), so the order and every decision are the same."""
        queues: dict[str, list[Waiting[Id]]] = {}
        for job in jobs:
            queues.setdefault(job.team, []).append(job)
        heap = []
        for team, q in queues.items():
            q.sort(key=lambda j: (-j.priority, j.queued_at, j.order_id), reverse=True)
            heap.append((self._team_key(team, q[-1]), team))
        # The key ends in the head job's age and id, which no two teams share: the team's name
        # never decides (it used to: at default settings teams were served in name order).
        heapq.heapify(heap)
        alike = {team: _alike(q) for team, q in queues.items()} if park else {}
        parked: dict[str, tuple] = {}     # team -> its key's part that is not the head's, as parked
        at = self.ledger.version          # the ledger's version when they were parked
        while heap:
            key, team = heapq.heappop(heap)
            q = queues[team]
            yield q.pop()
            if parked and self.ledger.version != at:
                for other, prefix in parked.items():
                    rest = queues[other]
                    while rest and (*prefix, rest[-1].queued_at, rest[-1].order_id) < key:
                        self._wait(rest.pop())
                    if rest:
                        heapq.heappush(heap, ((*prefix, rest[-1].queued_at, rest[-1].order_id), other))
                parked.clear()
            if not q:
                continue
            pushed = self._team_key(team, q[-1])
            if park and len(q) <= alike[team] and self.hopeless.get(q[-1].kind) == self.ledger.version:
                parked[team], at = pushed[:-2], self.ledger.version
            else:
                heapq.heappush(heap, (pushed, team))
        for team in parked:               # the ledger never changed again: each would have waited
            for job in reversed(queues[team]):
                self._wait(job)

    def _team_key(self, team: str, head: Waiting[Id]) -> tuple:
        key = head.kind
        known = self.keys.get(key)
        if known is None or known[0] != self.ledger.version:
            value = (not self.ledger.within_nominal(team, head.demand), *self.ledger.fair_key(team))
            known = self.keys[key] = (self.ledger.version, value)
        return (*known[1], self.served.get(team, -math.inf), head.queued_at, head.order_id)

    def _consider(self, job: Waiting[Id], *, urgent: bool) -> None:
        """Starts the job, preempts for it, keeps capacity for it, or lets it wait. Nothing that
        decides changes while the ledger does not (its version), so a job like one that just had
        to wait (same team, same demand, no preempting class) waits too, without a second look:
        that keeps a pass over 10,000 waiting jobs cheap. (What else decides, the preemption
        budget and the jobs taken, changes only with a preemption, which changes the ledger.)"""
        kind = job.kind       # (team, demand): jobs of one kind fare alike while nothing changes
        if not urgent and not job.may_preempt and self.hopeless.get(kind) == self.ledger.version:
            return self._wait(job)
        if urgent and not job.may_preempt and self.starved.get(kind) == self.ledger.version \
                and job.job_id not in self.stopping_for:
            return self._wait(job, STARVING)
        ledger = self.ledger
        if ledger.over_borrowing_limit(job.team, job.demand):
            return self._wait_hopeless(job, kind)
        if ledger.fits(job.team, job.demand):
            ledger.add(job.team, job.demand)
            self.served[job.team] = self.now
            self.decision.admit.append(Admitted(job.job_id, job.team, self._admit_why(job)))
            return None
        if job.job_id in self.stopping_for:
            ledger.reserve(job.team, job.demand)
            ledger.promise(job.team, job.demand)
            return self._wait(job, f"waiting for {self.stopping_for[job.job_id]} preempted job(s) to stop")
        budget = self.policy.max_preemptions_per_pass - len(self.decision.preempt)
        victims = choose_victims(ledger, job, self.running, self.borrowed, self.taken, budget, self.now,
                                 self.policy.min_runtime_s)
        if victims:
            for v, how in victims:
                self.taken.add(v.job_id)
                self.decision.preempt.append(Preempted(v.job_id, v.team, job.job_id, how, _preempt_why(v, job, how)))
            ledger.reserve(job.team, job.demand)
            ledger.promise(job.team, job.demand)
            return self._wait(job, f"waiting for {len(victims)} preempted job(s) to stop")
        if urgent and ledger.could_ever_fit(job.team, job.demand):
            before = ledger.version
            ledger.reserve(job.team, job.demand)
            if ledger.version == before and not job.may_preempt:
                # Nothing was free to keep: a job of its kind would fare the same (a starving backlog
                # of thousands was looked at in full on every pass: 50 µs a job, bench/whatif.py).
                self.starved[kind] = before
            return self._wait(job, STARVING)
        if self.reservations > 0 and quota_part(ledger.short(job.team, job.demand)) and \
                ledger.could_ever_fit(job.team, job.demand):
            # The first job in the order that does not fit keeps what frees (Slurm's backfill
            # reservation): a 2-core job was passed again and again by 1-core ones, and whether it
            # started hung on two ends falling in one controller pass, which no forecast can know.
            # Not for a launch slot alone: every job holds one, so the next goes to the first in line.
            self.reservations -= 1
            ledger.reserve(job.team, job.demand)
            return self._wait(job, "capacity is kept for it as it frees: later jobs start only in what it does not need")
        return self._wait_hopeless(job, kind)

    def _wait(self, job: Waiting[Id], note: str = "") -> None:
        self.left.append((job, note))

    def _wait_hopeless(self, job: Waiting[Id], kind: tuple) -> None:
        # As things stand now (a look that ended here left the ledger's figures as they were).
        self.hopeless[kind] = self.ledger.version
        self.left.append((job, ""))

    def _admit_why(self, job: Waiting[Id]) -> str:
        if self.ledger.borrows(job.team):
            return f"fits; team {job.team} borrows idle capacity"
        if self.ledger.share(job.team).nominal and quota_part(job.demand):
            return f"fits; team {job.team} is inside its nominal quota"
        return "fits"


STARVING = "waited longer than the starvation limit: capacity is kept for it as it frees"


def _alike(q: list[Waiting]) -> int:
    """How many of a team's queue, from its end (popped last), are of one kind that cannot preempt."""
    if not q or q[0].may_preempt:
        return 0
    kind = q[0].kind
    n = 0
    for job in q:
        if job.may_preempt or job.kind != kind:
            break
        n += 1
    return n


def _by_age(job: Waiting) -> tuple:
    return job.queued_at, job.order_id


def with_place(why: str, ahead: int) -> str:
    place = "next in line" if ahead == 0 else f"{ahead} job{'s' if ahead != 1 else ''} ahead"
    return f"{why}; {place}" if why else place


def _preempt_why(victim: Running, job: Waiting, kind) -> str:
    if kind.value == "reclaim":
        return f"team {job.team} reclaims its nominal quota from team {victim.team}, which borrows beyond its own"
    return f"a job of priority {job.priority} (team {job.team}) needs the capacity of this priority {victim.priority} job"
