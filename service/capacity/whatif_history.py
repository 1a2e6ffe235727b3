"""The jobs a what-if replays (`trainjobs queue simulate`): one backend's jobs submitted in a window,
as they happened. A job is its first attempt and every attempt after it (retries, preemptions):
it was submitted once, waited until its first attempt started, and held capacity for all its
attempts' run times together (a preempted job resumes from its checkpoint)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.capacity.whatif_replay import PastJob
from service.persistence.models import Job, Team


@dataclass
class History:
    jobs: list[PastJob] = field(default_factory=list)
    waited: dict[uuid.UUID, float] = field(default_factory=dict)  # what happened: first start - submit
    never_started: int = 0      # left out: no attempt ever ran (cancelled or expired while queued, still queued)
    still_running: int = 0      # replayed with their run time so far


def count(session: Session, backend: str, since: datetime, until: datetime) -> int:
    """The job rows (attempts included) submitted in the window: what a replay would read."""
    return session.scalar(select(func.count()).select_from(Job).where(
        Job.backend == backend, Job.created_at >= since, Job.created_at < until)) or 0


def read(session: Session, backend: str, since: datetime, until: datetime) -> History:
    """The window's jobs. An attempt whose first attempt was submitted before the window is left
    out with it; a run not ended yet counts up to `until`."""
    names = dict(session.execute(select(Team.id, Team.name)).all())
    rows = session.execute(select(Job.id, Job.retry_of, Job.team_id, Job.priority, Job.may_preempt, Job.demand,
                                  Job.created_at, Job.started_at, Job.ended_at)
                           .where(Job.backend == backend, Job.created_at >= since, Job.created_at < until)
                           .order_by(Job.created_at, Job.id)).all()
    firsts = {r.id: r for r in rows if r.retry_of is None}
    ran: dict[uuid.UUID, float] = {}
    started: dict[uuid.UUID, datetime] = {}
    running: set[uuid.UUID] = set()
    for r in rows:
        root = r.retry_of or r.id
        if root not in firsts or r.started_at is None:
            continue
        ran[root] = ran.get(root, 0.0) + max(0.0, ((r.ended_at or until) - r.started_at).total_seconds())
        started[root] = min(started.get(root, r.started_at), r.started_at)
        if r.ended_at is None:
            running.add(root)
    out = History(still_running=len(running))
    for job_id, r in firsts.items():
        if job_id not in started:
            out.never_started += 1
            continue
        out.jobs.append(PastJob(job_id, names.get(r.team_id, "?"), r.priority or 0, bool(r.may_preempt),
                                dict(r.demand or {}), r.created_at.timestamp(), ran[job_id]))
        out.waited[job_id] = max(0.0, (started[job_id] - r.created_at).total_seconds())
    return out

