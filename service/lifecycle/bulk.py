"""A batch of observations written in a few statements, not three round trips a job.

The per-job path (Engine.apply) reads the row, writes it with a compare-and-set on the state
it read and the controller's fence, then inserts the event: on PostgreSQL each is a round trip,
and a controller pass waited for them one job at a time (bench/README.md, issue 51.2: 88% of a
pass). Here the same decisions (Engine.planned, Engine.recorded) are made for the whole batch
from one read, the rows written by one UPDATE per chunk that keeps each row's guarantee in its
WHERE (its id, the state it was read in, the fence) and returns the ids it changed, and the
plain events inserted together. A row that changed since it was read is not overwritten: it is
handed to the per-job path, which reads it again and decides from what it is now; if the fence
no longer holds, Deposed, and the caller rolls the whole batch back. A failure, a retry's new
attempt or a preemption's end takes the per-job event path (rare, and they read more). SQLite
and PostgreSQL run the same statements."""
from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Table, and_, bindparam, case, exists, insert, or_, select, update
from sqlalchemy.orm import Session

from service.core.clock import utcnow
from service.lifecycle.engine import APPLY_COLUMNS, LEASE, Deposed, Engine, Planned
from service.lifecycle.protocol import Observation
from service.lifecycle.states import JobState
from service.persistence.models import ControllerLease, Job, JobEvent

# Rows per UPDATE: a row's new values are chosen by a CASE on its id, whose cost grows with the
# statement's rows (a chunk of 100 keeps it far below the round trip it saves).
CHUNK = 100


def apply_many(engine: Engine, session: Session, observations: Sequence[Observation], *, fence: int | None,
               actor: str) -> int:
    """Apply `observations` in the caller's transaction (it commits). Returns how many jobs' states changed.
    A job reported more than once (the sim's RUNNING and its end, seen by one poll) is written in
    rounds, each of its reports in its own, in their order: every round is a batch."""
    changed = 0
    rest = list(observations)
    while rest:
        first: dict = {}
        later: list[Observation] = []
        for obs in rest:
            (later.append(obs) if obs.job_id in first else first.__setitem__(obs.job_id, obs))
        changed += _round(engine, session, first, fence=fence, actor=actor)
        rest = later
    return changed


def _round(engine: Engine, session: Session, first: dict, *, fence: int | None, actor: str) -> int:
    """One report a job (`first`, by job id), read together, written together."""
    cleaned = {job_id: engine.cleaned(obs) for job_id, obs in first.items()}
    rows = {r.id: r for r in session.execute(select(*APPLY_COLUMNS).where(Job.id.in_(list(first))))}
    now = utcnow()
    plans: list[Planned] = []
    for job_id, obs in first.items():
        row = rows.get(job_id)
        if row is None:
            continue
        _, progress, error = cleaned[job_id]
        p = engine.planned(session, obs, row, progress, error, now)
        if p is not None:
            plans.append(p)
    written: set = set()
    for i in range(0, len(plans), CHUNK):
        written |= write(session, plans[i:i + CHUNK], fence)
    again = [p.obs for p in plans if p.obs.job_id not in written]
    if again and fence is not None and not engine.fence_holds(session, fence):
        raise Deposed(f"controller epoch {fence} is no longer current")
    events: list[dict] = []
    changed = 0
    for p in plans:
        if p.obs.job_id in written:
            engine.recorded(session, p, actor, cleaned[p.obs.job_id][0], events)
            changed += p.dst is not None
    if events:
        session.execute(insert(JobEvent), events)
    for obs in again:   # changed since it was read: decided again from what it is now
        changed += engine.apply(session, obs, fence=fence, actor=actor)
    return changed


def write(session: Session, plans: Sequence[Planned], fence: int | None) -> set:
    """One UPDATE of every planned row whose state is still the one it was read in (and the
    fence holds); the ids it changed."""
    if not plans:
        return set()
    t = cast(Table, Job.__table__)
    values = {}
    for key in sorted({k for p in plans for k in p.values}):
        col = t.c[key]
        whens = [(t.c.id == p.obs.job_id, bindparam(None, p.values[key], type_=col.type))
                 for p in plans if key in p.values]
        values[key] = case(*whens, else_=col)
    by_seen: dict[str, list] = {}
    for p in plans:
        by_seen.setdefault(p.seen, []).append(p.obs.job_id)
    stmt = update(t).where(or_(*[and_(t.c.state == seen, t.c.id.in_(ids)) for seen, ids in by_seen.items()]))
    if fence is not None:
        stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == fence))
    return set(session.execute(stmt.values(values).returning(t.c.id)).scalars())


def mark_attempts(engine: Engine, session: Session, job_ids: Sequence, *, fence: int | None) -> set:
    """Engine.mark_launch_attempt (an unclaimed one) for each job at once: one UPDATE of the jobs
    still QUEUED, fenced; the ids it marked (a job cancelled since it was read is not)."""
    if not job_ids:
        return set()
    stmt = update(Job).where(Job.id.in_(list(job_ids)), Job.state == JobState.QUEUED.value)
    if fence is not None:
        stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == fence))
    stmt = stmt.values(launch_attempted_at=utcnow()).returning(Job.id).execution_options(synchronize_session=False)
    marked = set(session.execute(stmt).scalars())
    if len(marked) < len(set(job_ids)) and fence is not None and not engine.fence_holds(session, fence):
        raise Deposed(f"controller epoch {fence} is no longer current")
    return marked
