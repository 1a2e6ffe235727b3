"""Jobs: create (compile, validate, store QUEUED), read, list, request a cancel.
Raises domain errors only. Launching, following and ending jobs is the
controller's (service.lifecycle): a request never calls a backend's submit or
cancel, so no request races the controller and none waits on Google."""
from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime
from types import SimpleNamespace

from sqlalchemy import or_, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from service import jobspec
from service.auth.service import Actor
from service.budgets import service as budgets
from service.core.errors import Conflict, Invalid, NotFound, Problem
from service.core.pagination import decode_cursor, encode_cursor
from service.cost.estimate import Pricer
from service.jobs import overrides_policy, store
from service.jobs.schemas import JobCreate, JobPreview, ReplicaOut, TemplateRef
from service.jobspec.reserved import JOB_ID_LABEL
from service.jobspec.validate import label_key_ok, label_value_ok
from service.lifecycle import retries
from service.lifecycle.controller import ADMIT_SUFFIX, notify_controller
from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Backend, LaunchView
from service.lifecycle.states import TERMINAL, JobState
from service.persistence.models import Job, JobEvent, JobLabel, utcnow
from service.templates import service as templates
from service.templates.cache import TemplateCache
from service.web.lookup import id_range

log = logging.getLogger("trainjobs.jobs")


def launch_view(backends: Mapping[str, Backend], backend: str, job_id: uuid.UUID, compiled: jobspec.CompiledJob,
                backend_ref: str | None) -> LaunchView:
    """The CustomJob and each replica's env exactly as the job's backend gives them (its
    defaults, local ports and paths); as compiled when that backend is not enabled here."""
    b = backends.get(backend)
    return b.launch_view(job_id, compiled, backend_ref) if b is not None else Backend().launch_view(
        job_id, compiled, backend_ref)


def cluster_view(compiled: jobspec.CompiledJob, view: LaunchView) -> list[ReplicaOut]:
    return [ReplicaOut(task_name=r.task_name, pool=r.pool, index=r.index, tf_role=r.tf_role,
                       image_uri=r.image_uri, command=list(r.command), args=list(r.args),
                       env=view.env[r.task_name], status=view.replicas.get(r.task_name)) for r in compiled.replicas]


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


def create_job(session: Session, backends: Mapping[str, Backend], engine: Engine, body: JobCreate, *,
               template_cache: TemplateCache, default_backend: str, dry_run: bool, actor: Actor,
               pricer: Pricer, idempotency_key: str | None = None, verify_token: str = "",
               relaunch_of: uuid.UUID | None = None,
               trial: jobspec.Trial | None = None, wake_others: bool = True,
               ) -> tuple[Job | JobPreview, bool, jobspec.CompiledJob | None]:
    """Returns (job or preview, replayed, compiled): replayed is True when the Idempotency-Key
    matched an earlier identical request and that job is returned instead; compiled is the
    new job's CompiledJob (None for a replayed one: read it from the row).
    `verify_token`: the hash of a token taken from the auth cache, checked here against
    revocation before anything is read or written for it (auth.cache). `relaunch_of`:
    the job this one launches again (recorded on the row and in its first event). `trial`:
    the sweep trial this job runs (service.sweeps), for its env and labels. `wake_others`:
    False when this process controls the database and wakes its own loop (router.submit):
    a NOTIFY would only come back to it."""
    digest = request_hash(body, dry_run) if idempotency_key else None
    if idempotency_key and not dry_run:
        if verify_token:
            templates.check_token_live(session, verify_token)
            verify_token = ""
        existing = _replay(session, actor, idempotency_key, digest)
        if existing is not None:
            return existing, True, None

    tv = templates.for_submit(session, template_cache, actor.team_id, body.template, body.template_version,
                              token_hash=verify_token)
    if tv.archived:
        raise Conflict(f"template {body.template!r} is archived; "
                       f"POST /v1/templates/{body.template}/unarchive to use it again")
    submitted = overrides_policy.enforce(actor, tv.name, tv.version, tv.prepared.spec, body.overrides)
    backend_name = body.backend or default_backend
    backend = _backend(backends, backend_name)
    job_id = uuid.uuid4()
    display_name = body.display_name if body.display_name is not None else f"{body.template}-{job_id.hex[:8]}"
    _spec, compiled = jobspec.build_from(tv.prepared, body.parameters, body.overrides,
                                         display_name=display_name, labels=body.labels,
                                         reserved_labels={JOB_ID_LABEL: str(job_id)}, trial=trial)
    problems = backend.check_launchable(compiled) + retries.limit_problems(compiled.retry, engine.retry_limits)
    if problems:
        raise Invalid.of(problems)
    ref = TemplateRef(name=tv.name, version=tv.version)
    cost = pricer.estimate(compiled.custom_job_dict, backend_name)
    if dry_run:
        view = backend.launch_view(job_id, compiled, None)
        return JobPreview(display_name=display_name, template=ref, backend=backend_name,
                          labels=view.custom_job.get("labels", {}), custom_job=view.custom_job,
                          cluster=cluster_view(compiled, view), cost=cost, resources=view.resources), False, compiled
    # Under the team's limits lock, in this transaction: the check and the insert commit together.
    # A team without limits (the template query said so) takes no lock: limits set by an
    # admin meanwhile hold from the next submit, as if set just after this one.
    if tv.team_limited:
        budgets.check_submit(session, actor.team_id, actor.team, cost)

    now = utcnow()
    values = dict(id=job_id, team_id=actor.team_id, display_name=display_name, template_id=tv.template_id,
                  template_name=ref.name, template_version=ref.version, backend=backend_name,
                  state=JobState.QUEUED.value, parameters=dict(body.parameters), overrides=body.overrides,
                  labels=dict(body.labels), compiled=compiled.to_json(), created_by=actor.name,
                  created_at=now, updated_at=now, idempotency_key=idempotency_key,
                  request_hash=digest if idempotency_key else None, backend_ref=None, console_url=None,
                  error=None, progress=None, started_at=None, ended_at=None, launch_attempted_at=None,
                  waiting_reason=None, attempt=1, retry_of=None, not_before=None, relaunch_of=relaunch_of)
    # JSON columns as the text stored; the compiled job from the JSON the compiler already wrote.
    row = {k: (compiled.to_json_text() if k == "compiled" else store.encode(v)) if k in store.JSON_COLUMNS else v
           for k, v in values.items()}
    if relaunch_of is not None:
        submitted += f"; relaunch of job {relaunch_of}"
    event = engine.creation_event(job_id, actor.name, now, reason=submitted)
    try:
        store.insert_job(session, row, body.labels, event, budgets.cost_row(job_id, actor.team_id, cost),
                         wake=backend_name + ADMIT_SUFFIX if wake_others else None)
        engine.announce_created(session, event, {"team_webhooks": tv.team_webhooks})
        # Committed before the controller can see it: a rolled-back request never launches anything.
        session.commit()
    except IntegrityError:
        # Another request with the same Idempotency-Key committed first.
        session.rollback()
        if idempotency_key:
            existing = _replay(session, actor, idempotency_key, digest)
            if existing is not None:
                return existing, True, None
        raise
    # The stored row, without a SELECT or an ORM object (its instrumentation costs more than
    # the view needs): the response reads these attributes, as it would a Job's.
    # `cost`: the estimate just made, so the answer does not price the job twice.
    return SimpleNamespace(**values, cost=cost), False, compiled


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
              cursor: str | None, id_prefix: str | None = None, name: str | None = None) -> tuple[list[Job], str | None]:
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


def _label_filter_ok(label: str) -> bool:
    key, sep, value = label.partition("=")
    return label_key_ok(key) and (not sep or label_value_ok(value))


def list_events(session: Session, team_id: uuid.UUID, job_id: uuid.UUID) -> list[JobEvent]:
    get_job(session, team_id, job_id)
    return list(session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)))


def cancel_job(session: Session, engine: Engine, job_id: uuid.UUID, actor: Actor) -> Job:
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
    notify_controller(session, job.backend)
    session.commit()
    return get_job(session, actor.team_id, job_id)


def attempts_of(session: Session, job: Job) -> list:
    """Every attempt of the job `job` is one of (its first, then its retries), in order."""
    first = job.retry_of or job.id
    return list(session.execute(select(Job.id, Job.attempt, Job.state)
                                .where(or_(Job.id == first, Job.retry_of == first))
                                .order_by(Job.attempt)).all())
