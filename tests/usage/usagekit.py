"""Jobs with a run in the past, written as the engine would have left them (state, started_at,
ended_at, demand), and the ledger recomputed at a chosen time."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import select, update

from service.auth.service import get_or_create_team
from service.persistence.models import Job, UsageBucket, UsageTotal
from service.usage.recompute import recompute
from service.usage.settings import UsageSettings
from tests.capacity.test_planner import _jobs

WEIGHTS = {"core": 1.0, "gpu:*": 10.0}
HALF_LIFE = 86_400.0
SETTINGS = UsageSettings(billing_weights=WEIGHTS, half_life_seconds=HALF_LIFE, recompute_seconds=60)


def ran(client, token: str, session_factory, *, start: datetime, end: datetime | None, demand: dict,
        backend: str = "local", team: str | None = None) -> uuid.UUID:
    """A job of `token`'s team (or `team`'s) that ran from start to end (None: still running)."""
    [job_id] = _jobs(client, token, 1)
    with session_factory() as s:
        if team is not None:
            s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(team_id=get_or_create_team(s, team).id))
        s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(
            state="RUNNING" if end is None else "SUCCEEDED", backend_ref=f"ref-{job_id}", demand=demand,
            backend=backend, started_at=start, ended_at=end))
        s.commit()
    return uuid.UUID(job_id)


def fold_at(session_factory, now: datetime, settings: UsageSettings = SETTINGS, fence: int | None = None) -> int:
    """Recomputes until nothing is left to fold (a pass folds at most a day); the passes it took."""
    for passes in range(1, 1000):
        with session_factory() as s:
            more = recompute(s, now, settings, fence=fence)
            s.commit()
        if not more:
            return passes
    raise AssertionError("the recompute never caught up")


def buckets(session_factory) -> dict[tuple, float]:
    with session_factory() as s:
        return {(t, b, h): u for t, b, h, u in s.execute(
            select(UsageBucket.team_id, UsageBucket.backend, UsageBucket.hour, UsageBucket.units))}


def totals(session_factory) -> dict[tuple, float]:
    with session_factory() as s:
        return {(t, b): u for t, b, u in s.execute(select(UsageTotal.team_id, UsageTotal.backend, UsageTotal.units))}


def hours_ago(now: datetime, h: float) -> datetime:
    return now - timedelta(hours=h)
