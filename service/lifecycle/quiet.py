"""When a controller pass may leave the plan alone: the last plan decided nothing (no launch,
no preemption) and nothing it reads has changed since. A pass then costs one aggregate query
instead of the planner's read of every waiting job (10,000 waiting: ~1 s a pass on two shared
cores, bench/README.md queue_scale) and the gate's check of every held team.

What the plan reads, and what changes it: a backend's unfinished jobs (a submit inserts one, a
launch, an end, a cancel or a preemption writes one, each with a new `updated_at`); a retry
attempt's backoff running out (no write: the count of jobs due changes with the clock); the
teams' shares, the backend's capacity and the teams' limits (rows with an `updated_at`). The
signature below folds these into one row; any write to them changes it. What changes with the
clock alone, or is written elsewhere slowly (a job's wait crossing the starvation limit, a
spending window rolling over for a held team, the teams' decayed use that the usage ledger
recomputes every few minutes), is caught by planning again at least every `replan_seconds`."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, case, exists, func, select
from sqlalchemy.orm import Session

from service.lifecycle.admission import UNLAUNCHED, due
from service.lifecycle.states import ACTIVE
from service.persistence.models import BackendCapacity, Job, JobBackend, TeamLimits, TeamShare

ACTIVE_STATES = sorted(s.value for s in ACTIVE)
# The longest a pass goes on trusting a plan that decided nothing: what changes with the clock
# alone (a starvation limit of minutes, a spending window) is seen this much later at most. The
# service's is TRAINJOBS_RECONCILE_REPLAN_SECONDS (lifecycle/settings.py); this is its default.
REPLAN_SECONDS = 10.0


def epoch_sum(session: Session, column):
    """The sum of a time column in seconds: any one row's change changes it, whichever clock
    wrote it (a max alone misses a write stamped by a host whose clock is behind)."""
    if session.get_bind().dialect.name == "postgresql":
        return func.coalesce(func.sum(func.extract("epoch", column)), 0)
    return func.coalesce(func.sum(func.julianday(column)), 0) * 86_400


def _rows(session: Session, model, *where) -> tuple:
    """(count, latest updated_at, sum of updated_at) of a small table's rows, as scalar subqueries."""
    agg = select(func.count(), func.max(model.updated_at), epoch_sum(session, model.updated_at)).where(*where)
    return tuple(select(c).select_from(model).where(*where).scalar_subquery() for c in agg.selected_columns)


def signature(session: Session, backend: str, now: datetime) -> tuple:
    """One row that changes whenever what the backend's plan reads changes (see the module's
    docstring): its unfinished jobs (how many, how many wait and are due, their writes' times),
    and the shares, capacity and team limits."""
    jobs = select(func.count(), func.sum(case((and_(UNLAUNCHED, due(now)), 1), else_=0)), func.max(Job.updated_at),
                  epoch_sum(session, Job.updated_at)).where(Job.backend == backend, Job.state.in_(ACTIVE_STATES))
    first = tuple(session.execute(jobs).one())
    others = session.execute(select(*_rows(session, TeamShare, TeamShare.backend == backend),
                                    *_rows(session, BackendCapacity, BackendCapacity.backend == backend),
                                    *_rows(session, TeamLimits), accepted_here(backend))).one()
    # Jobs of several backends whose most preferred is another but that accept this one, unclaimed
    # (capacity/snapshot.py reads them): a new one, or one claimed elsewhere, changes the plan here.
    # Read only where some job ever accepted this backend among others: the join costs a pass on a
    # busy jobs table (post_vs_floor lost ~4% to it and the snapshot's own read, bench/README.md).
    elsewhere: tuple = (0, None)
    if others[-1]:
        elsewhere = tuple(session.execute(select(func.count(), epoch_sum(session, Job.updated_at)).where(
            JobBackend.backend == backend, Job.id == JobBackend.job_id, Job.backend != backend, UNLAUNCHED,
            Job.launch_attempted_at.is_(None))).one())
    return first + elsewhere + tuple(others)


def accepted_here(backend: str):
    """Whether any job accepts `backend` among several (an index probe of job_backends), as a column."""
    return exists().where(JobBackend.backend == backend).label("accepted_here")


class Quiet:
    """A backend loop's memory of its last plan: whether the next pass may skip planning."""

    def __init__(self, replan_seconds: float) -> None:
        self.replan_seconds = replan_seconds
        self._last: tuple | None = None     # the signature when the last plan decided nothing
        self._planned_at = float("-inf")    # monotonic seconds of that plan

    def unchanged(self, sig: tuple, clock: float) -> bool:
        """Whether the last plan decided nothing, nothing it read has changed, and it is recent."""
        return self._last == sig and clock - self._planned_at < self.replan_seconds

    def planned(self, sig: tuple | None, clock: float, idle: bool) -> None:
        """A plan was made on `sig` (read before it) and ended at `clock`; `idle`: it decided
        nothing (no launch, no preemption)."""
        self._last = sig if idle else None
        self._planned_at = clock

    def forget(self) -> None:
        self._last = None
