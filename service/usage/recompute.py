"""The controller's usage recompute (a loop service, every TRAINJOBS_USAGE_RECOMPUTE_SECONDS):
folds every started job's run into per team, backend and clock-hour buckets of billing units, then
each team's decayed total per backend, in one transaction (at most CATCH_UP of hours a pass).

Counted once, whatever happens: every hour from the watermark (`refold_from`) on is computed
again from the jobs' rows (started_at, ended_at, demand) and *replaces* its bucket, never adds to
it, so a recompute repeated, or run by two controllers, or cut short by a crash, counts nothing
twice; the watermark then moves to the hour before the current one (an end recorded up to an hour
late still lands in its hour). Only the leader runs it (the controller's loop services), its
write is fenced by the controller's epoch, and the rows are locked for the transaction
(PostgreSQL: the ledger row FOR UPDATE; SQLite: one writer). A restart resumes from the stored
watermark; the first recompute folds back HORIZON_HALF_LIVES half-lives. The totals are kept as a
closed part (the hours before the watermark, decayed to it) and the hours since, so a recompute
reads the hours since the watermark only."""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from service.core.clock import utcnow
from service.lifecycle.engine import LEASE, Deposed
from service.lifecycle.services import LoopService
from service.lifecycle.states import TERMINAL
from service.persistence.models import ControllerLease, Job, UsageBucket, UsageLedger, UsageTotal
from service.usage.billing import HOUR, bucket_age, decayed, floor_hour, horizon, split_hours, units_per_hour
from service.usage.settings import UsageSettings
from service.usage.store import LEDGER

log = logging.getLogger("trainjobs.usage")

_TERMINAL = {s.value for s in TERMINAL}
# The hours one recompute folds at most: the first one (10 half-lives back) or one after a long
# outage catches up a day a pass, the passes one after another, each a short transaction (a
# single one over 70 days held SQLite's write lock for a minute: bench/usage_ledger.py).
CATCH_UP = timedelta(days=1)
Key = tuple[uuid.UUID, str, datetime]   # team id, backend, hour


class UsageRecompute(LoopService):
    name = "usage"

    def __init__(self, session_factory: sessionmaker[Session], settings: UsageSettings, *, fence: int | None,
                 clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__(interval=settings.recompute_seconds)
        self.session_factory, self.settings, self.fence, self.clock = session_factory, settings, fence, clock

    def run_once(self) -> bool:
        with self.session_factory() as session:
            more = recompute(session, self.clock(), self.settings, fence=self.fence)
            session.commit()
        return more


def recompute(session: Session, now: datetime, settings: UsageSettings, *, fence: int | None) -> bool:
    """One recompute in the caller's transaction (it commits). True: hours are left to fold (the
    first recompute, or one after a long outage, folds CATCH_UP of them a pass)."""
    row = _locked(session)
    if row is None:   # the first recompute: made empty, then locked, so a second one waits on it
        _create(session, now, settings)
        row = _locked(session)
        assert row is not None
    half_life = settings.half_life_seconds
    oldest = horizon(now, half_life)
    start = max(row.refold_from, oldest)
    end = min(now, start + CATCH_UP)
    folded = fold(_runs(session, start, end), start, end, settings.billing_weights)
    session.execute(delete(UsageBucket).where(or_(UsageBucket.hour >= start, UsageBucket.hour < oldest)))
    if folded:
        session.execute(insert(UsageBucket), [{"team_id": t, "backend": b, "hour": h, "units": u}
                                              for (t, b, h), u in folded.items()])
    # The watermark never moves back (a clock stepped back refolds from where it was).
    refold = max(row.refold_from, floor_hour(end) - HOUR)
    _write_totals(session, row.refold_from, refold, now, half_life)
    session.execute(update(UsageLedger).where(UsageLedger.name == LEDGER).values(
        refold_from=refold, computed_at=now, half_life_seconds=half_life, weights=dict(settings.billing_weights)))
    if fence is not None and session.scalar(select(ControllerLease.epoch).where(ControllerLease.name == LEASE)) != fence:
        raise Deposed(f"controller epoch {fence} is no longer current")
    return end < now


def _locked(session: Session) -> UsageLedger | None:
    """The ledger row, locked for this transaction: PostgreSQL FOR UPDATE; SQLite takes its one
    write lock with an UPDATE first, so reads and writes after it see one state."""
    dialect = session.get_bind().dialect.name
    if dialect != "postgresql":
        session.execute(update(UsageLedger).where(UsageLedger.name == LEDGER).values(name=LEDGER))
    query = select(UsageLedger).where(UsageLedger.name == LEDGER).execution_options(populate_existing=True)
    if dialect == "postgresql":
        query = query.with_for_update()
    return session.execute(query).scalar_one_or_none()


def _create(session: Session, now: datetime, settings: UsageSettings) -> None:
    """The ledger row, unless another recompute made it first (then this waits on its lock)."""
    insert_ = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    session.execute(insert_(UsageLedger).values(name=LEDGER, refold_from=horizon(now, settings.half_life_seconds),
                                                computed_at=now, half_life_seconds=settings.half_life_seconds,
                                                weights={}).on_conflict_do_nothing())


def _runs(session: Session, start: datetime, now: datetime) -> Iterable[tuple[uuid.UUID, str, Mapping | None,
                                                                             datetime, datetime]]:
    """Every job that ran at some time in [start, now): team, backend, demand, its run's start and
    end (a running job's end: now; an ended job without an end recorded: its last update)."""
    rows = session.execute(select(Job.team_id, Job.backend, Job.demand, Job.started_at, Job.ended_at, Job.state,
                                  Job.updated_at)
                           .where(Job.started_at.is_not(None), Job.started_at < now,
                                  or_(Job.ended_at.is_(None), Job.ended_at > start)))
    for team_id, backend, demand, started, ended, state, updated in rows:
        end = ended or (updated if state in _TERMINAL else now)
        yield team_id, backend, demand, started, min(end, now)


def fold(runs: Iterable[tuple[uuid.UUID, str, Mapping | None, datetime, datetime]], start: datetime, now: datetime,
         weights: Mapping[str, float]) -> dict[Key, float]:
    """The billing units of each (team, backend, hour) from `start` to `now`."""
    out: dict[Key, float] = {}
    for team_id, backend, demand, began, ended in runs:
        rate = units_per_hour(demand, weights)
        if rate <= 0:
            continue
        for hour, part in split_hours(max(began, start), min(ended, now)):
            key = (team_id, backend, hour)
            out[key] = out.get(key, 0.0) + rate * part
    return out


def _write_totals(session: Session, was: datetime, refold: datetime, now: datetime, half_life: float) -> None:
    """Each team's decayed use per backend as of `now`: its `closed` part (the hours before the
    watermark, decayed to it) moved from the old watermark `was` to `refold` with the hours in
    between, plus the hours from `refold` on. Only the hours since `was` are read."""
    closed = {(t, b): decayed(float(c), (refold - was).total_seconds(), half_life)
              for t, b, c in session.execute(select(UsageTotal.team_id, UsageTotal.backend, UsageTotal.closed))}
    recent: dict[tuple[uuid.UUID, str], float] = {}
    for team_id, backend, hour, units in session.execute(
            select(UsageBucket.team_id, UsageBucket.backend, UsageBucket.hour, UsageBucket.units)
            .where(UsageBucket.hour >= was)):
        key = (team_id, backend)
        if hour < refold:
            closed[key] = closed.get(key, 0.0) + decayed(float(units), bucket_age(hour, refold), half_life)
        else:
            recent[key] = recent.get(key, 0.0) + decayed(float(units), bucket_age(hour, now), half_life)
    session.execute(delete(UsageTotal))
    rows = [{"team_id": t, "backend": b, "closed": closed.get((t, b), 0.0),
             "units": decayed(closed.get((t, b), 0.0), (now - refold).total_seconds(), half_life) + recent.get((t, b), 0.0)}
            for t, b in closed.keys() | recent.keys()]
    if rows:
        session.execute(insert(UsageTotal), rows)
