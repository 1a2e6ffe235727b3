"""Reads of what changed in jobs, for pages that follow them (the UI's live feed and the
jobs list's progress numbers): typed rows, one indexed query each, no web framework.

A change is the few columns a page refreshes, never the job's spec or logs: the live
feed reads every changed job of every team once per interval."""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from service.persistence.models import Job


@dataclass(frozen=True)
class JobChange:
    id: uuid.UUID
    team_id: uuid.UUID
    state: str
    display_name: str
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime
    # progress["epoch"] and ["epochs"] as the trainer reported them: not checked here, so a
    # page keeps them only when they are counts (service/ui/feed.py).
    epoch: object
    epochs: object
    # error["cause"]: "preemption" marks a FAILED attempt that was preempted (a new attempt goes on),
    # which pages show as preempted rather than as a failure.
    cause: object = None


# Only the two progress numbers are read out of the JSON column, not the whole document.
_COLUMNS = (Job.id, Job.team_id, Job.state, Job.display_name, Job.updated_at, Job.started_at, Job.ended_at,
            Job.created_at, Job.progress["epoch"].as_string().label("epoch"),
            Job.progress["epochs"].as_string().label("epochs"), Job.error["cause"].as_string().label("cause"))


def _read(session: Session, q: Select) -> list[JobChange]:
    return [JobChange(*row) for row in session.execute(q)]


def changes_of(session: Session, team_id: uuid.UUID, job_ids: Sequence[uuid.UUID]) -> list[JobChange]:
    """The team's jobs `job_ids` as changes (e.g. the rows of one page of the jobs list)."""
    if not job_ids:
        return []
    return _read(session, select(*_COLUMNS).where(Job.team_id == team_id, Job.id.in_(list(job_ids))))


def team_changes_since(session: Session, team_id: uuid.UUID, job_id: uuid.UUID | None, since: datetime,
                       limit: int) -> list[JobChange]:
    """The team's jobs (or its one job `job_id`) updated at or after `since`, oldest first, at most `limit`."""
    q = select(*_COLUMNS).where(Job.team_id == team_id, Job.updated_at >= since)
    if job_id is not None:
        q = q.where(Job.id == job_id)
    return _read(session, q.order_by(Job.updated_at).limit(limit))


def changes_since(session: Session, since: datetime) -> list[JobChange]:
    """Every team's jobs updated at or after `since`, oldest first (ix_jobs_updated_at)."""
    return _read(session, select(*_COLUMNS).where(Job.updated_at >= since).order_by(Job.updated_at))


def change_of_job(job: Job) -> JobChange:
    """A job already read (jobs.service.get_job) as a change, without another query."""
    p = job.progress if isinstance(job.progress, dict) else {}
    e = job.error if isinstance(job.error, dict) else {}
    return JobChange(job.id, job.team_id, job.state, job.display_name, job.updated_at, job.started_at, job.ended_at,
                     job.created_at, p.get("epoch"), p.get("epochs"), e.get("cause"))


def preempted(state: str, cause: object) -> bool:
    """A preempted attempt: FAILED because its capacity went to another job (the controller's
    preemption or Slurm's), with a new attempt going on from its checkpoint."""
    return state == "FAILED" and cause == "preemption"


def preempted_among(session: Session, team_id: uuid.UUID, job_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of the team's jobs `job_ids` are preempted attempts (one query; none without ids)."""
    if not job_ids:
        return set()
    rows = session.execute(select(Job.id, Job.state, Job.error["cause"].as_string())
                           .where(Job.team_id == team_id, Job.id.in_(list(job_ids)), Job.state == "FAILED"))
    return {job_id for job_id, state, cause in rows if preempted(state, cause)}
