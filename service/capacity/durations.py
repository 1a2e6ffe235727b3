"""How long a job will likely run, for the queue's forecast (service/scheduling/forecast.py):
the median of what the same team's jobs of the same template took on this backend lately
(SUCCEEDED, started and ended), else its time limit. Read only for the queue's reads, never
by the controller's pass."""
from __future__ import annotations

import statistics
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.lifecycle.states import JobState
from service.persistence.models import Job

LOOKBACK = timedelta(days=14)    # what ran before that says little about today's jobs
PER_TEAM = 200                   # the most recent ended jobs read per team (ix_jobs_team_ended)

Key = tuple[uuid.UUID, str]      # (team id, template name)


def expected_durations(session: Session, backend: str, teams: Iterable[uuid.UUID], now: datetime) -> dict[Key, float]:
    """Per (team, template): the median run time in seconds of its recent successful jobs here."""
    seen: dict[Key, list[float]] = {}
    for team_id in teams:
        rows = session.execute(
            select(Job.template_name, Job.started_at, Job.ended_at)
            .where(Job.team_id == team_id, Job.ended_at > now - LOOKBACK, Job.backend == backend,
                   Job.state == JobState.SUCCEEDED.value, Job.started_at.is_not(None))
            .order_by(Job.ended_at.desc()).limit(PER_TEAM))
        for name, started, ended in rows:
            if name and started is not None and ended is not None and ended >= started:
                seen.setdefault((team_id, name), []).append((ended - started).total_seconds())
    return {key: statistics.median(values) for key, values in seen.items()}
