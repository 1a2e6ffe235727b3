"""Job rows as the read-only JobHandles backends receive."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service import jobspec
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState
from service.persistence.models import Job, Team

# The team's name by a correlated subquery (one primary-key lookup a row): read_handles' callers need no join.
_TEAM_NAME = select(Team.name).where(Team.id == Job.team_id).correlate(Job).scalar_subquery().label("team")
HANDLE_COLUMNS = (Job.id, Job.state, Job.backend_ref, Job.created_at, Job.display_name, Job.launch_attempted_at,
                  _TEAM_NAME, Job.priority_class, Job.team_id)


def handle_of_row(session_factory, row, compiled: dict | None = None) -> JobHandle:
    """A handle from a HANDLE_COLUMNS row; its CompiledJob is read (in a short session
    of its own) on first use: most active jobs have no news on most passes. `compiled`: the
    stored CompiledJob, already read (compiled_of: the jobs a pass submits, in one query)."""
    def load() -> jobspec.CompiledJob:
        if compiled is not None:
            return jobspec.CompiledJob.from_json(compiled)
        with session_factory() as session:
            return jobspec.CompiledJob.from_json(session.scalar(select(Job.compiled).where(Job.id == row.id)))
    return JobHandle(id=row.id, state=JobState(row.state), backend_ref=row.backend_ref, compiled=load,
                     created_at=row.created_at, display_name=row.display_name,
                     launch_attempted_at=row.launch_attempted_at, team=row.team,
                     priority_class=row.priority_class)


def handle_of_job(job: Job) -> JobHandle:
    return JobHandle(id=job.id, state=JobState(job.state), backend_ref=job.backend_ref,
                     compiled=lambda: jobspec.CompiledJob.from_json(job.compiled), created_at=job.created_at,
                     display_name=job.display_name, launch_attempted_at=job.launch_attempted_at,
                     priority_class=job.priority_class)


def read_handles(session: Session, where, *, order=(Job.created_at, Job.id), limit: int | None = None):
    q = select(*HANDLE_COLUMNS).where(*where).order_by(*order)
    if limit is not None:
        q = q.limit(limit)
    return session.execute(q).all()


def compiled_of(session: Session, ids: list) -> dict:
    """The stored CompiledJob of each job (by id) in one query: a pass reads those it submits
    together, not in a session each (bench/README.md, issue 51.2: a tenth of a pass)."""
    return {r.id: r.compiled for r in session.execute(select(Job.id, Job.compiled).where(Job.id.in_(ids)))} if ids else {}
