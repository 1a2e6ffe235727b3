"""The lifecycle's CapacityPlanner (service/lifecycle/admission.py): one backend's snapshot
(snapshot.py) through the pure scheduler (service/scheduling), as the Plan the controller
carries out. The same plan, computed read-only, is what GET /v1/queue and a waiting job's view
show (so what a member reads is what the controller does)."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from sqlalchemy.orm import Session

from service.capacity import snapshot as snapshots
from service.capacity.passes import PassClock
from service.capacity.settings import CapacitySettings
from service.capacity.waiting_memo import WaitingMemo
from service.lifecycle.admission import Plan, PreemptOrder
from service.scheduling import preference
from service.scheduling.across import Side, across
from service.scheduling.forecast import explained
from service.scheduling.model import Decision, Policy
from service.scheduling.scheduler import schedule


class Planner:
    def __init__(self, settings: CapacitySettings) -> None:
        self.settings = settings
        self.policy = Policy(starve_after_s=settings.starve_after_seconds,
                             max_preemptions_per_pass=settings.max_preemptions_per_pass,
                             grace_s=settings.grace_seconds, forecast_seconds=settings.forecast_seconds,
                             forecast_passes=settings.forecast_passes, pass_s=settings.pass_seconds,
                             reservations=settings.reservations,
                             min_runtime_s=settings.min_runtime_seconds)
        # Each enabled backend's launch slots (its max running jobs; None: no limit), which the
        # composition root sets: a plan across backends reads the others' too.
        self.slots: dict[str, int | None] = {}
        # What each backend's controller loop says of its passes (their lengths, the last's end),
        # which the forecast plays (capacity/passes.py); empty in a process whose controller does not pass.
        self.passes = PassClock()

    def snapshot(self, session: Session, backend: str, now: datetime | None = None, *, slots: int | None = None,
                 held_teams: frozenset = frozenset(), forecast: bool = False,
                 memo: WaitingMemo | None = None) -> snapshots.Snapshot:
        return snapshots.load(session, backend, self.settings.defaults, max_waiting=self.settings.max_waiting,
                               max_preemptions_per_job=self.settings.max_preemptions_per_job,
                               grace_seconds=self.settings.grace_seconds, now=now, slots=slots,
                               held_teams=held_teams, forecast=forecast, memo=memo)

    def decide(self, snap: snapshots.Snapshot, now: datetime, *, explain: bool = True) -> Decision:
        """explain: every waiting job's place in the predicted start order, why, its likely start
        and its start at the latest (service/scheduling/forecast.py); else the decision alone."""
        if explain:
            return explained(snap.arbitrated, snap.shares, snap.running, snap.waiting, now.timestamp(),
                             self.passes.told(self.policy, snap.backend), served=snap.served, usage=snap.usage)
        return schedule(snap.arbitrated, snap.shares, snap.running, snap.waiting, now.timestamp(), self.policy,
                        explain=False, served=snap.served, usage=snap.usage)

    def heard_pass(self, backend: str, took: float, ended_at: float, launched: bool = False) -> None:
        """A full controller pass on `backend` took `took` seconds and ended at `ended_at` (epoch);
        `launched`: it launched jobs."""
        self.passes.heard(backend, took, ended_at, launched)

    def new_memo(self) -> WaitingMemo:
        return WaitingMemo()

    def plan(self, session: Session, backend: str, now: datetime, *, explain: bool = True,
             room: int | None = None, slots: int | None = None, held_teams: frozenset = frozenset(),
             memo: object | None = None) -> Plan:
        """`slots`: the backend's launch slots (its max running jobs; None: no limit), which the
        scheduler arbitrates like cores. `room`: how many it has free now (None: not known). With
        none free and no capacity declared for the backend, nobody can be preempted (no quota
        governs a slot alone), so the plan is empty without reading a single waiting job: a
        backend at its limit with 10,000 queued read them all on every pass a submit woke
        (bench/README.md). `held_teams`: teams the admission gate holds (their jobs are not read).
        `memo`: the controller loop's waiting jobs kept from its last plan (waiting_memo.py)."""
        if room is not None and room <= 0 and not snapshots.capacity_of(session, backend, self.settings.defaults)[0]:
            return Plan()
        snap = self.snapshot(session, backend, now, slots=slots, held_teams=held_teams,
                             memo=memo if isinstance(memo, WaitingMemo) else None)
        if snap.accepts:
            return self._across(session, snap, now, held_teams)
        return to_plan(self.decide(snap, now, explain=explain))

    def _across(self, session: Session, snap: snapshots.Snapshot, now: datetime, held_teams: frozenset) -> Plan:
        """Some waiting jobs accept other backends too (docs/queue.md, "Placement across backends"):
        those backends are read as well and decided in one pass (scheduling/across.py), so that a job
        starts here only if this is the most preferred backend that admits it now. Each backend's loop
        plans this way on its own; the launch's claim (lifecycle.engine.mark_launch_attempt) makes
        sure a job starts on one at most, whichever loop writes first."""
        names = {n for accepted in snap.accepts.values() for n in accepted if n != snap.backend and n in self.slots}
        others = [self.snapshot(session, n, now, slots=self.slots[n], held_teams=held_teams) for n in sorted(names)]
        sides = [_side(s) for s in (snap, *others)]
        accepts = dict(snap.accepts)
        wishes = dict(snap.wishes)
        for other in others:
            accepts.update(other.accepts)
            wishes.update(other.wishes)
        t = now.timestamp()
        wished = self._wished(session, sides, accepts, wishes, now, held_teams, snap)
        # A job waiting for the backend its wish names is out of the others' queues this pass.
        sides = [replace(s, waiting=[w for w in s.waiting if s.name in accepts.get(w.job_id, (s.name,))]) for s in sides]
        result = across(sides, accepts, t, self.policy, usage=snap.usage)
        plan = to_plan(result.decisions[snap.backend])
        plan.why.update({job: "; ".join(w for w in (wished.get(job), result.why[job]) if w)
                         for job in plan.admit if job in result.why})
        return plan

    def _wished(self, session: Session, sides: list[Side], accepts: dict, wishes: dict, now: datetime,
                held_teams: frozenset, snap: snapshots.Snapshot) -> dict:
        """Each wishing job's backends in its wish's order, and those it may start on this pass
        (scheduling/preference.py), set in `accepts`; returns why, in words, per job. Its estimated
        start on a backend: the queue's forecast of that backend (read again with the jobs' likely
        durations, only for a pass where a job wishes `soonest` or a start_by), else now where what
        it asks is free there now."""
        t = now.timestamp()
        jobs = [j for j, w in wishes.items() if j in accepts]
        need = [j for j in jobs if wishes[j].prefer == "soonest" or wishes[j].start_by is not None]
        played: dict = {}
        if need:
            full = [self.snapshot(session, s.name, now, held_teams=held_teams, forecast=True,
                                  slots=snap.slots if s.name == snap.backend else self.slots.get(s.name)) for s in sides]
            played = preference.forecast_starts([_side(f) for f in full], need, t, self.policy, usage=snap.usage)
        why = {}
        for job in jobs:
            now_or_never = preference.starts_now(sides, job, t)
            # The forecast plays the scheduler (quotas, priorities): it wins where it placed the job.
            starts = {**{n: v for n, v in now_or_never.items() if v is not None}, **played.get(job, {})}
            order, why[job] = preference.order(accepts[job], wishes[job], starts, t)
            accepts[job] = preference.may_start_on(order, wishes[job], starts, t)
        return why


def _side(s: snapshots.Snapshot) -> Side:
    return Side(s.backend, s.arbitrated, s.shares, s.running, s.waiting, s.served)


def to_plan(decision: Decision[uuid.UUID]) -> Plan:
    """The scheduler's decision over the rows' ids (the snapshot's jobs are the rows)."""
    return Plan(
        admit=[a.job_id for a in decision.admit],
        preempt=[PreemptOrder(p.job_id, p.for_job, p.kind.value, p.why) for p in decision.preempt],
        waiting={q.job_id: q for q in decision.queue})
