"""Jobs: read, list, request a cancel (a submit is jobs.submitter's).
Raises domain errors only. Launching, following and ending jobs is the
controller's (service.lifecycle): a request never calls a backend's submit or
cancel, so no request races the controller and none waits on Google."""
from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import func, or_, select, tuple_
from sqlalchemy.orm import Session, defer

from service import jobspec
from service.auth.service import Actor
from service.core.errors import Conflict, Invalid, NotFound, Problem
from service.core.pagination import ID_PREFIX_MAX, ID_PREFIX_MIN, decode_cursor, encode_cursor, id_range
from service.jobs.schemas import ReplicaOut
from service.jobspec.validate import label_key_ok, label_value_ok
from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Backend, LaunchView, default_launch_view
from service.lifecycle.states import TERMINAL, JobState
from service.lifecycle.wake import Wake, Waker
from service.persistence.models import Job, JobEvent, JobLabel

log = logging.getLogger("trainjobs.jobs")


def launch_view(backends: Mapping[str, Backend], backend: str, job_id: uuid.UUID, compiled: jobspec.CompiledJob,
                backend_ref: str | None) -> LaunchView:
    """The CustomJob and each replica's env exactly as the job's backend gives them (its
    defaults, local ports and paths); as compiled when that backend is not enabled here."""
    b = backends.get(backend)
    return b.launch_view(job_id, compiled, backend_ref) if b is not None else default_launch_view(compiled)


def runs_on(backends: Mapping[str, Backend], backend: str) -> str | None:
    """Where `backend` runs a job, for the cost estimate's words (Capabilities.runs_on)."""
    b = backends.get(backend)
    return b.capabilities.runs_on if b is not None else "a backend not enabled on this service"


def cluster_view(compiled: jobspec.CompiledJob, view: LaunchView) -> list[ReplicaOut]:
    return [ReplicaOut(task_name=r.task_name, pool=r.pool, index=r.index, tf_role=r.tf_role,
                       image_uri=r.image_uri, command=list(r.command), args=list(r.args),
                       env=view.env[r.task_name], status=view.replicas.get(r.task_name)) for r in compiled.replicas]


def get_job(session: Session, team_id: uuid.UUID, job_id: uuid.UUID, *, for_update: bool = False) -> Job:
    # Another team's job answers 404 like a missing one: its existence is not ours to tell.
    q = select(Job).where(Job.id == job_id, Job.team_id == team_id)
    if for_update:
        q = q.with_for_update()
    job = session.scalar(q)
    if job is None:
        raise NotFound(f"no job with id {job_id}")
    return job


def list_jobs(session: Session, team_id: uuid.UUID, *, states: list[JobState], template: str | None, labels: list[str],
              created_after: datetime | None, created_before: datetime | None, limit: int,
              cursor: str | None, id_prefix: str | None = None, name: str | None = None,
              text: str | None = None, created_by: str | None = None) -> tuple[list[Job], str | None]:
    """`id_prefix`, `name`: the CLI's lookups (a unique id prefix, an exact display name); `text`: in
    the display or template name (any case), or the job's whole id (the UI's search); `created_by`:
    the launcher as jobs record it (`token@team`, the UI's "my jobs")."""
    q = (select(Job).options(defer(Job.compiled), defer(Job.overrides), defer(Job.parameters),
                             defer(Job.error))
         .where(Job.team_id == team_id)
         .order_by(Job.created_at.desc(), Job.id.desc()).limit(limit + 1))
    if states:
        q = q.where(Job.state.in_([s.value for s in states]))
    if template:
        q = q.where(Job.template_name == template)
    if id_prefix:
        q = q.where(Job.id.between(*id_range(id_prefix)))
    if name is not None:
        q = q.where(Job.display_name == name)
    if text:
        q = q.where(_text_matches(text))
    if created_by:
        q = q.where(Job.created_by == created_by)
    bad = [Problem("label", f"{label!r} is not key or key=value with Google's label rules",
                   "keys: a lowercase letter, then lowercase letters, digits, _ or -; values likewise; "
                   "64 characters each at most")
           for label in labels if not _label_filter_ok(label)]
    if bad:
        raise Invalid.of(bad)
    for label in labels:
        key, sep, value = label.partition("=")
        sub = select(JobLabel.job_id).where(JobLabel.key == key)
        if sep:
            sub = sub.where(JobLabel.value == value)
        q = q.where(Job.id.in_(sub))
    if created_after:
        q = q.where(Job.created_at >= created_after)
    if created_before:
        q = q.where(Job.created_at < created_before)
    if cursor:
        at, jid = decode_cursor(cursor, 2)
        try:
            after_at, after_id = datetime.fromisoformat(at), uuid.UUID(jid)
            if after_at.tzinfo is None:
                raise ValueError("no time zone")
        except ValueError:
            raise Invalid.of([Problem("cursor", "not a cursor this service handed out",
                                      "pass next_cursor unchanged")]) from None
        q = q.where(tuple_(Job.created_at, Job.id) < (after_at, after_id))
    rows = list(session.scalars(q))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (encode_cursor(rows[-1].created_at.isoformat(), rows[-1].id) if more else None)


_HEX_PREFIX = re.compile(rf"^[0-9a-f]{{{ID_PREFIX_MIN},{ID_PREFIX_MAX}}}$")


def _text_matches(text: str):
    """A part of a name, a whole job id, or the start of one as the CLI prints it (`3f2a9b1c`,
    dashes optional): the id's a range scan of the primary key, as `id_prefix`."""
    needle = text.strip().lower()
    found = or_(func.lower(Job.display_name).contains(needle, autoescape=True),
                func.lower(Job.template_name).contains(needle, autoescape=True))
    try:
        return or_(found, Job.id == uuid.UUID(needle))
    except ValueError:
        pass
    digits = needle.replace("-", "")
    if _HEX_PREFIX.match(digits):
        return or_(found, Job.id.between(*id_range(digits)))
    return found


def _label_filter_ok(label: str) -> bool:
    key, sep, value = label.partition("=")
    return label_key_ok(key) and (not sep or label_value_ok(value))


def list_events(session: Session, team_id: uuid.UUID, job_id: uuid.UUID) -> list[JobEvent]:
    get_job(session, team_id, job_id)
    return list(session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)))


def cancel_job(session: Session, engine: Engine, job_id: uuid.UUID, actor: Actor, *,
               waker: Waker | None = None) -> Job:
    """Record the request (CANCELLING); the controller stops the job and records how it ended."""
    job = get_job(session, actor.team_id, job_id)
    state = JobState(job.state)
    if state in TERMINAL:
        raise Conflict(f"job {job_id} has already ended ({state.value}); nothing to cancel",
                       current_state=state.value)
    try:
        engine.move(session, job_id, JobState.CANCELLING, reason="cancel requested", actor=actor.name)
    except Conflict:
        # It ended between our read and our write.
        session.rollback()
        now = JobState(session.scalar(select(Job.state).where(Job.id == job_id)))
        raise Conflict(f"job {job_id} has already ended ({now.value}); nothing to cancel",
                       current_state=now.value) from None
    # The controller wakes for a full pass (the cancel); the caller wakes this process's loops.
    (waker or Waker()).on_commit(session, Wake(job.backend))
    session.commit()
    return get_job(session, actor.team_id, job_id)


def job_and_attempts(session: Session, team_id: uuid.UUID, job_id: uuid.UUID) -> tuple[Job, list[Job]]:
    """get_job and attempts_of in one query (GET /v1/jobs/{id}: a round trip less on every
    view): the rows of the job's whole chain, found from its first attempt in the statement."""
    first = func.coalesce(select(Job.retry_of).where(Job.id == job_id).scalar_subquery(), job_id)
    chain = list(session.scalars(select(Job).where(Job.team_id == team_id,
                                                   or_(Job.id == job_id, Job.id == first, Job.retry_of == first))
                                 .order_by(Job.attempt)))
    job = next((j for j in chain if j.id == job_id), None)
    if job is None:
        raise NotFound(f"no job with id {job_id}")  # another team's job too, as get_job says
    return job, chain


def attempts_of(session: Session, job: Job) -> list:
    """Every attempt of the job `job` is one of (its first, then its retries), in order."""
    first = job.retry_of or job.id
    return list(session.execute(select(Job.id, Job.attempt, Job.state, Job.preempt_requested_at, Job.preempted_for,
                                       Job.preempt_reason, Job.preempt_kind, Job.error, Job.progress)
                                .where(or_(Job.id == first, Job.retry_of == first))
                                .order_by(Job.attempt)).all())
