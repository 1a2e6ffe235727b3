"""Jobs: create (compile, store, then submit), read, list, cancel, and apply
what backends observe. Raises domain errors only."""
from __future__ import annotations

import hashlib
import json
import logging
import uuid
from datetime import datetime
from typing import Mapping

from sqlalchemy import insert, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer, make_transient_to_detached

from service import jobspec
from service.auth.service import Actor
from service.backends.base import (Backend, JobHandle, Observation, PermanentBackendError,
                                   TransientBackendError)
from service.errors import BackendRefused, BackendRejected, Conflict, Invalid, NotFound, Problem
from service.jobs.epochs import record_epoch
from service.jobs.schemas import JobCreate, JobPreview, ReplicaOut, TemplateRef
from service.jobs.states import TERMINAL, JobState, can_transition, transition
from service.models import Job, JobEvent, JobLabel, utcnow
from service.pagination import decode_cursor, encode_cursor
from service.templates import service as templates

log = logging.getLogger("trainjobs.jobs")
JOB_ID_LABEL = "trainjobs-job-id"


def handle_of(job: Job) -> JobHandle:
    # Lazy: a deferred `compiled` column is only fetched if the backend asks for it.
    return JobHandle(id=job.id, state=JobState(job.state), backend_ref=job.backend_ref,
                     compiled=lambda: jobspec.CompiledJob.from_json(job.compiled), created_at=job.created_at,
                     display_name=job.display_name)


HANDLE_COLUMNS = (Job.id, Job.state, Job.backend_ref, Job.created_at, Job.display_name)


def handle_of_row(session: Session, row) -> JobHandle:
    """A handle from a HANDLE_COLUMNS row; its CompiledJob is read on first use."""
    def load() -> jobspec.CompiledJob:
        return jobspec.CompiledJob.from_json(session.scalar(select(Job.compiled).where(Job.id == row.id)))
    return JobHandle(id=row.id, state=JobState(row.state), backend_ref=row.backend_ref, compiled=load,
                     created_at=row.created_at, display_name=row.display_name)


def cluster_view(compiled: jobspec.CompiledJob) -> list[ReplicaOut]:
    return [ReplicaOut(task_name=r.task_name, pool=r.pool, index=r.index, tf_role=r.tf_role,
                       image_uri=r.image_uri, command=list(r.command), args=list(r.args),
                       env=compiled.env(r)) for r in compiled.replicas]


def _backend(backends: Mapping[str, Backend], name: str) -> Backend:
    if name not in backends:
        raise Invalid.of([Problem("backend", f"backend {name!r} is not enabled on this service",
                                  f"use one of: {', '.join(sorted(backends))} "
                                  "(the service's TRAINJOBS_BACKENDS setting enables others)")])
    return backends[name]


def request_hash(body: JobCreate, dry_run: bool) -> str:
    canonical = json.dumps({"body": body.model_dump(mode="json"), "dry_run": dry_run},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replay(session: Session, actor: Actor, key: str, digest: str) -> Job | None:
    job = session.scalar(select(Job).where(Job.team_id == actor.team_id, Job.idempotency_key == key))
    if job is None:
        return None
    if job.request_hash != digest:
        raise Conflict(f"Idempotency-Key {key!r} was used for a different request (job {job.id}); "
                       "use a new key for a new job", job_id=str(job.id))
    return job


def create_job(session: Session, backends: Mapping[str, Backend], body: JobCreate, *,
               default_backend: str, dry_run: bool, actor: Actor,
               idempotency_key: str | None = None) -> tuple[Job | JobPreview, bool]:
    """Returns (job or preview, replayed): replayed is True when the Idempotency-Key
    matched an earlier identical request and that job is returned instead."""
    digest = request_hash(body, dry_run) if idempotency_key else None
    if idempotency_key and not dry_run:
        existing = _replay(session, actor, idempotency_key, digest)
        if existing is not None:
            return existing, True

    tv = templates.get_version(session, actor.team_id, body.template, body.template_version)
    if tv.template.archived_at is not None:
        raise Conflict(f"template {body.template!r} is archived; "
                       f"POST /v1/templates/{body.template}/unarchive to use it again")
    backend_name = body.backend or default_backend
    backend = _backend(backends, backend_name)
    job_id = uuid.uuid4()
    display_name = body.display_name if body.display_name is not None else f"{body.template}-{job_id.hex[:8]}"
    _spec, compiled = jobspec.build(tv.spec, tv.parameters, body.parameters, body.overrides,
                                    display_name=display_name, labels=body.labels,
                                    reserved_labels={JOB_ID_LABEL: str(job_id)})
    problems = backend.check_launchable(compiled)
    if problems:
        raise Invalid.of(problems)
    ref = TemplateRef(name=tv.template.name, version=tv.version)
    if dry_run:
        return JobPreview(display_name=display_name, template=ref, backend=backend_name,
                          labels=compiled.custom_job_dict.get("labels", {}),
                          custom_job=compiled.custom_job_dict, cluster=cluster_view(compiled)), False

    now = utcnow()
    values = dict(id=job_id, team_id=actor.team_id, display_name=display_name, template_id=tv.template_id,
                  template_name=ref.name, template_version=ref.version, backend=backend_name,
                  state=JobState.QUEUED.value, parameters=dict(body.parameters), overrides=body.overrides,
                  labels=dict(body.labels), compiled=compiled.to_json(), created_by=actor.name,
                  created_at=now, updated_at=now, idempotency_key=idempotency_key,
                  request_hash=digest if idempotency_key else None, backend_ref=None, console_url=None,
                  error=None, progress=None, started_at=None, ended_at=None)
    # Bulk-style inserts: the hot path of the service, and the unit-of-work machinery
    # costs more than the three statements themselves.
    try:
        session.execute(insert(Job), [values])
        if body.labels:
            session.execute(insert(JobLabel), [{"job_id": job_id, "key": k, "value": v}
                                               for k, v in body.labels.items()])
        session.execute(insert(JobEvent), [{"job_id": job_id, "from_state": None, "to_state": JobState.QUEUED.value,
                                            "reason": "submitted", "actor": actor.name, "at": now}])
        # Commit before the backend hears of it: a rolled-back request never launches anything.
        session.commit()
    except IntegrityError:
        # Another request with the same Idempotency-Key committed first.
        session.rollback()
        if idempotency_key:
            existing = _replay(session, actor, idempotency_key, digest)
            if existing is not None:
                return existing, True
        raise
    # The stored row, attached without a SELECT, so a submit result can update it.
    job = Job(**values)
    make_transient_to_detached(job)
    session.add(job)
    _submit(session, backend, job, actor.name)
    return job, False


def _submit(session: Session, backend: Backend, job: Job, actor: str) -> None:
    try:
        result = backend.submit(handle_of(job))
    except TransientBackendError as e:
        # The job stays QUEUED; the backend's poll finishes the submit later.
        log.warning("job %s: submit deferred: %s", job.id, e)
        return
    except PermanentBackendError as e:
        apply_observation(session, Observation(job.id, state=JobState.FAILED, error={"code": e.code, "message": e.message},
                                               reason=f"backend refused the job: {e.message}"))
        session.commit()
        raise BackendRejected(f"{job.backend} refused the job: {e.message}", job_id=str(job.id),
                              backend_code=e.code) from None
    if result.state is None and not result.backend_ref and not result.console_url:
        return  # queued at the backend: nothing to record
    # Through the same path as the reconciler's observations: the row is read again
    # (a cancel or a poll may have moved the job on while the backend was called).
    apply_observation(session, Observation(job.id, state=result.state, backend_ref=result.backend_ref,
                                           console_url=result.console_url,
                                           reason=result.reason or "submitted to backend"))
    session.commit()


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
              cursor: str | None) -> tuple[list[Job], str | None]:
    q = (select(Job).options(defer(Job.compiled), defer(Job.overrides), defer(Job.parameters),
                             defer(Job.error), defer(Job.progress))
         .where(Job.team_id == team_id)
         .order_by(Job.created_at.desc(), Job.id.desc()).limit(limit + 1))
    if states:
        q = q.where(Job.state.in_([s.value for s in states]))
    if template:
        q = q.where(Job.template_name == template)
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
            key = (datetime.fromisoformat(at), uuid.UUID(jid))
            if key[0].tzinfo is None:
                raise ValueError("no time zone")
        except ValueError:
            raise Invalid.of([Problem("cursor", "not a cursor this service handed out",
                                      "pass next_cursor unchanged")]) from None
        q = q.where(tuple_(Job.created_at, Job.id) < key)
    rows = list(session.scalars(q))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (encode_cursor(rows[-1].created_at.isoformat(), rows[-1].id) if more else None)


def list_events(session: Session, team_id: uuid.UUID, job_id: uuid.UUID) -> list[JobEvent]:
    get_job(session, team_id, job_id)
    return list(session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)))


def cancel_job(session: Session, backends: Mapping[str, Backend], job_id: uuid.UUID, actor: Actor) -> Job:
    job = get_job(session, actor.team_id, job_id, for_update=True)
    state = JobState(job.state)
    if state in TERMINAL:
        raise Conflict(f"job {job_id} has already ended ({state.value}); nothing to cancel",
                       current_state=state.value)
    if state == JobState.CANCELLING:
        return job
    transition(session, job, JobState.CANCELLING, reason="cancel requested", actor=actor.name)
    session.commit()
    backend = backends.get(job.backend)
    if backend is None:  # the backend was disabled since: nothing can stop it from here
        return job
    try:
        reached = backend.cancel(handle_of(job))
    except TransientBackendError as e:
        log.warning("job %s: cancel deferred: %s", job_id, e)  # the backend's poll retries it
        return job
    except PermanentBackendError as e:
        raise BackendRefused(f"{job.backend} refused the cancel: {e.message}. The job stays CANCELLING "
                             "and ends however the backend ends it", job_id=str(job_id),
                             backend_code=e.code) from None
    if reached:
        apply_observation(session, Observation(job.id, state=reached, reason="cancelled before it started"
                                               if reached == JobState.CANCELLED else "cancel"), actor=actor.name)
        session.commit()
    return job


def apply_observation(session: Session, obs: Observation, actor: str = "backend") -> bool:
    """Apply what a backend saw. Returns True if the job's state changed."""
    job = session.get(Job, obs.job_id, with_for_update=session.bind.dialect.name != "sqlite",
                      populate_existing=True)
    if job is None:
        return False
    if obs.backend_ref and job.backend_ref != obs.backend_ref:
        job.backend_ref = obs.backend_ref
    if obs.console_url:
        job.console_url = obs.console_url
    if obs.progress is not None:
        job.progress = obs.progress
        record_epoch(session, job.id, obs.progress)
    if obs.started_at and job.started_at is None:
        job.started_at = obs.started_at
    if obs.error is not None:
        job.error = obs.error
    changed = False
    if obs.state is not None and obs.state.value != job.state:
        current = JobState(job.state)
        if current in TERMINAL:
            log.info("job %s: ignoring %s after final %s", job.id, obs.state.value, current.value)
        elif can_transition(current, obs.state):
            changed = transition(session, job, obs.state, reason=obs.reason, actor=actor,
                                 at=obs.ended_at if obs.state in TERMINAL and obs.ended_at else None)
        else:
            log.warning("job %s: backend reported %s while %s; not allowed, ignored",
                        job.id, obs.state.value, current.value)
    if obs.ended_at and JobState(job.state) in TERMINAL:
        job.ended_at = obs.ended_at
    job.updated_at = utcnow()
    return changed
