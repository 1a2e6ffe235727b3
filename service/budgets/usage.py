"""What a team uses now: active jobs, their accelerators, this month's spend. And the
lock that makes "count, then insert or launch" safe with several API processes."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import and_, select, update
from sqlalchemy.orm import Session

from service.cost.estimate import hours_between, micros
from service.lifecycle.states import ACTIVE, JobState
from service.persistence.models import Job, JobCost, TeamLimits
from service.persistence.rows import rows_changed

_ACTIVE = [s.value for s in ACTIVE]


def lock_limits(session: Session, team_id: uuid.UUID) -> TeamLimits | None:
    """The team's limits row, locked until this transaction ends (None: no limits).

    Every check that may let a job in (a submit in refuse mode, a launch in the controller)
    calls this first and commits its job in the same transaction, so two checks for the
    last slot cannot both count the same use:
    - PostgreSQL: SELECT ... FOR UPDATE; the second check waits for the first to commit,
      then (READ COMMITTED) its counts see the first one's job.
    - SQLite: an UPDATE of the row. SQLite has one writer at a time: the write lock is
      held until commit, the second check's UPDATE waits (busy_timeout), and, since
      pysqlite opens the transaction at that UPDATE, its reads after it see the first job.
    """
    if session.get_bind().dialect.name == "postgresql":
        return session.execute(select(TeamLimits).where(TeamLimits.team_id == team_id)
                               .with_for_update().execution_options(populate_existing=True)).scalar_one_or_none()
    bumped = session.execute(update(TeamLimits).where(TeamLimits.team_id == team_id)
                             .values(checks=TeamLimits.checks + 1))
    if not rows_changed(bumped):
        return None
    return session.execute(select(TeamLimits).where(TeamLimits.team_id == team_id)
                           .execution_options(populate_existing=True)).scalar_one()


def month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def job_spend_to_timeout(per_hour_micros: int, timeout_seconds: int) -> int:
    return micros(Decimal(per_hour_micros) * Decimal(timeout_seconds) / Decimal(3600) / Decimal(1_000_000))


@dataclass
class Use:
    jobs: int = 0
    launched: int = 0
    accelerators: dict[str, int] = field(default_factory=dict)
    spend_micros: int = 0
    unpriced: int = 0

    def add_job(self, accelerators: dict | None, spend_micros: int, complete: bool | None) -> None:
        self.jobs += 1
        for kind, n in (accelerators or {}).items():
            self.accelerators[kind] = self.accelerators.get(kind, 0) + int(n)
        self.spend_micros += spend_micros
        self.unpriced += 0 if complete else 1


def _launched(state: str, backend_ref, attempted) -> bool:
    return not (state == JobState.QUEUED.value and backend_ref is None and attempted is None)


def team_use(session: Session, team_id: uuid.UUID, now: datetime, *, launched_only: bool) -> Use:
    """Use of the team's active jobs (launched_only: those launched or being launched, which is
    what a launch waits on; else every accepted job, which is what a submit counts) plus the
    accrued cost of its jobs that ended this month (the part of it since the month began).
    An active job holds its estimate to timeout: the most it can cost."""
    use = Use()
    active = session.execute(
        select(Job.state, Job.backend_ref, Job.launch_attempted_at, JobCost.per_hour_micros,
               JobCost.timeout_seconds, JobCost.accelerators, JobCost.complete)
        .outerjoin(JobCost, JobCost.job_id == Job.id)
        .where(Job.team_id == team_id, Job.state.in_(_ACTIVE)))
    for r in active:
        launched = _launched(r.state, r.backend_ref, r.launch_attempted_at)
        if launched:
            use.launched += 1
        elif launched_only:
            continue
        spend = job_spend_to_timeout(r.per_hour_micros or 0, r.timeout_seconds or 0)
        use.add_job(r.accelerators, spend, r.complete)
    start = month_start(now)
    ended = session.execute(
        select(Job.started_at, Job.ended_at, JobCost.per_hour_micros, JobCost.complete)
        .join(JobCost, JobCost.job_id == Job.id)
        .where(and_(Job.team_id == team_id, Job.ended_at >= start, Job.started_at.is_not(None))))
    for r in ended:
        hours = hours_between(max(r.started_at, start), r.ended_at)
        use.spend_micros += micros(Decimal(r.per_hour_micros) * hours / Decimal(1_000_000))
        use.unpriced += 0 if r.complete else 1
    return use
