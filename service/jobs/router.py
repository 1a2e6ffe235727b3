from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import StringConstraints
from sqlalchemy.orm import Session, object_session

from service.auth.authenticate import Authenticated, authenticate, forgetting_revoked
from service.auth.deps import CachedMember, Member, TokenHash, Viewer
from service.auth.service import Actor
from service.core.pagination import decode_time_cursor, storable_time
from service.cost.estimate import Pricer, accrued
from service.jobs import queries, service, submit_input
from service.jobs.preemption_history import preemptions_of
from service.jobs.queue_place import queue_place, queue_places
from service.jobs.schemas import (
    AttemptRef,
    JobCreate,
    JobEventOut,
    JobOut,
    JobPage,
    JobPreview,
    JobRelaunch,
    JobSummary,
    PlacementWishOut,
    TemplateRef,
)
from service.jobs.submitter import IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_KEY_PATTERN, Previewed
from service.jobspec import CompiledJob
from service.lifecycle.protocol import Backend
from service.lifecycle.states import JobState
from service.model_uploads import queue as model_queue
from service.persistence.models import Job, utcnow
from service.persistence.session import unit_of_work
from service.templates.schemas import TEMPLATE_NAME_PATTERN
from service.web.container import Services, SessionDep, services
from service.web.lookup import Cursor, IdPrefix, NameFilter, Timestamp
from service.web.problems import problem_responses
from service.web.request_threads import in_thread

# Google's label rules (international lowercase letters too) are checked by the service.
LabelFilter = Annotated[str, StringConstraints(min_length=1, max_length=129)]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _summary_fields(job: Job | SimpleNamespace) -> dict:
    return dict(id=job.id, display_name=job.display_name,
                template=TemplateRef(name=job.template_name, version=job.template_version),
                backend=job.backend, state=job.state, labels=job.labels, created_at=job.created_at,
                updated_at=job.updated_at, started_at=job.started_at, ended_at=job.ended_at,
                created_by=job.created_by, progress=job.progress, attempt=job.attempt, retry_of=job.retry_of,
                relaunch_of=job.relaunch_of)


def _resources(job, resources: dict, backends: Mapping[str, Backend]) -> dict:
    """The backend's `resources`, with how the model upload went (a row of its own, once the
    job SUCCEEDED: service/model_uploads/). Its row is made in the transaction that records
    SUCCEEDED, so no other job's view pays the query (a quarter of a GET's time)."""
    if "model_upload" not in resources or not isinstance(job, Job) or job.state != JobState.SUCCEEDED.value:
        return resources
    outcome = model_queue.view(object_session(job), job.id, backends.get(job.backend))
    if outcome is None:
        return resources
    return {**resources, "model_upload": {**resources["model_upload"], **outcome}}


def job_out(job: Job | SimpleNamespace, backends: Mapping[str, Backend], compiled: CompiledJob | None = None,
            pricer: Pricer | None = None,
            attempts: list | None = None) -> JobOut:
    """`attempts`: service.attempts_of(job); None for a job just created (its only attempt)."""
    compiled = compiled or CompiledJob.from_json(job.compiled)
    view = service.launch_view(backends, job.backend, job.id, compiled, job.backend_ref)
    cost = None
    if pricer is not None:
        # A job just created carries its estimate (JobSubmitter.submit); a stored one is priced now.
        cost = getattr(job, "cost", None) or pricer.estimate(compiled.custom_job_dict, job.backend,
                                                                 service.runs_on(backends, job.backend))
        cost.accrued = accrued(cost, job.started_at, job.ended_at, utcnow())
    refs = [AttemptRef(id=a.id, attempt=a.attempt, state=JobState(a.state)) for a in attempts] \
        if attempts is not None else [AttemptRef(id=job.id, attempt=job.attempt, state=JobState(job.state))]
    retried_by = next((a.id for a in refs if a.attempt == job.attempt + 1), None)
    session = object_session(job) if attempts else None
    preempted = preemptions_of(session, job.team_id, attempts) if session is not None and attempts else []
    error = job.error if isinstance(job.error, dict) else {}
    return JobOut(**_summary_fields(job), preempted=queries.preempted(job.state, error.get("cause")),
                  parameters=job.parameters, overrides=job.overrides,
                  backend_ref=job.backend_ref, console_url=job.console_url, error=job.error,
                  not_before=job.not_before, retried_by=retried_by, attempts=refs, preemptions=preempted,
                  waiting_reason=job.waiting_reason, state_observed_at=getattr(job, "state_observed_at", None),
                  accepts=[a["backend"] for a in getattr(job, "accepts", None) or ()],
                  placement=getattr(job, "placement", None), wish=_wish(getattr(job, "wish", None)),
                  custom_job=view.custom_job,
                  cluster=service.cluster_view(compiled, view), cost=cost, resources=_resources(job, view.resources, backends))


def _wish(wish: dict | None) -> PlacementWishOut | None:
    if not wish:
        return None
    start_by = wish.get("start_by")
    return PlacementWishOut(prefer=wish.get("prefer") or "listed", prices=wish.get("prices") or {},
                            start_by=datetime.fromtimestamp(start_by, UTC) if start_by is not None else None)


def submit(state: Services, session: Session, actor: Actor, body: JobCreate, idempotency_key: str | None, verify_token: str = "",
           dry_run: bool = False) -> Response:
    """The work of POST /v1/jobs once its inputs are checked: the one call into the submit."""
    result = state.submitter.submit(session, body, actor, dry_run=dry_run, idempotency_key=idempotency_key,
                                    verify_token=verify_token)
    if isinstance(result, Previewed):
        return _json(result.preview, 200)
    headers = {"Location": f"/v1/jobs/{result.job.id}"}
    if result.replayed:
        headers["Idempotent-Replayed"] = "true"
    return _json(job_out(result.job, state.backends, result.compiled, state.pricer), 201, headers)


@router.post("", status_code=201, response_model=JobOut, operation_id="jobs_create",
             summary="Launch a job from a template (or preview it with ?dry_run=true)",
             response_description="The job, stored and QUEUED (or already further along)",
             responses={200: {"model": JobPreview, "description": "Dry run: what would be launched; nothing stored"},
                        **problem_responses(401, 403, 404, 409, 413, 422, 503)},
             openapi_extra=submit_input.DECLARED)
async def create_job(request: Request) -> Response:
    # The route reads its own input (service/jobs/submit_input.py: FastAPI's answers, a fifth of
    # the CPU less), then the whole unit of work takes one trip through the thread pool
    # (in_thread): the token comes from the auth cache with no I/O, its revocation checked in
    # the submit's first query.
    body, auth, dry_run, idempotency_key = await submit_input.submit_input(request)
    return await in_thread(request, _create_in_unit, services(request), auth, body, idempotency_key, dry_run)


def _create_in_unit(state: Services, auth: Authenticated, body: JobCreate, idempotency_key: str | None,
                    dry_run: bool) -> Response:
    with unit_of_work(state.session_factory) as session, forgetting_revoked(auth, state.token_cache):
        return submit(state, session, auth.actor, body, idempotency_key, auth.unverified_token, dry_run)


@router.get("", response_model=JobPage, operation_id="jobs_list", summary="List jobs, newest first",
            responses=problem_responses(401, 422, 503))
def list_jobs(session: SessionDep, actor: Viewer,
              state: Annotated[list[JobState], Query(description="Repeat for several states")] = [],
              template: Annotated[str | None, Query(pattern=TEMPLATE_NAME_PATTERN)] = None,
              label: Annotated[list[LabelFilter], Query(
                  description="key=value, or key alone for any value; repeat to AND. Keys and values follow "
                              "Google's label rules (lowercase letters, digits, _ and -; a key starts with a "
                              "letter; at most 63 characters each)")] = [],
              created_after: Timestamp | None = None,
              created_before: Timestamp | None = None,
              id_prefix: IdPrefix = None, name: NameFilter = None,
              limit: Annotated[int, Query(ge=1, le=200)] = 50,
              cursor: Cursor = None):
    if cursor:
        decode_time_cursor(cursor)  # a forged cursor is a 422 before any query sees it
    jobs, next_cursor = service.list_jobs(session, actor.team_id, states=state, template=template, labels=label,
                                          created_after=storable_time(created_after, "created_after"),
                                          created_before=storable_time(created_before, "created_before"),
                                          limit=limit, cursor=cursor, id_prefix=id_prefix, name=name)
    preempted = queries.preempted_among(session, actor.team_id, [j.id for j in jobs if j.state == "FAILED"])
    return JobPage(items=[JobSummary(**_summary_fields(j), preempted=j.id in preempted) for j in jobs],
                   next_cursor=next_cursor)


def view(state: Services, session: Session, actor: Actor, job_id: uuid.UUID) -> Response:
    job, attempts = service.job_and_attempts(session, actor.team_id, job_id)
    out = job_out(job, state.backends, pricer=state.pricer, attempts=attempts)
    out.queue = queue_place(state.queue, state.backends, job)
    out.queues = queue_places(state.queue, state.backends, job)
    return _json(out)


@router.get("/{job_id}", response_model=JobOut, operation_id="jobs_get",
            summary="A job: state, error, progress, the rendered CustomJob",
            responses=problem_responses(401, 404, 422, 503))
async def get_job(job_id: uuid.UUID, request: Request, token_hash: TokenHash) -> Response:
    # The token (from the database: every role may read, and a revocation holds at once), the
    # job and its attempts, in one trip through the thread pool.
    return await in_thread(request, _view_in_unit, services(request), token_hash, job_id)


def _view_in_unit(state: Services, token_hash: str, job_id: uuid.UUID) -> Response:
    with unit_of_work(state.session_factory) as session:
        auth = authenticate(token_hash, "viewer", session=session)
        assert auth is not None  # a session was given
        return view(state, session, auth.actor, job_id)


def _json(model, status: int = 200, headers: dict | None = None) -> Response:
    # Already a validated JobOut: serialise it once instead of FastAPI validating it again.
    return Response(model.model_dump_json(), status_code=status, headers=headers, media_type="application/json")


@router.get("/{job_id}/events", response_model=list[JobEventOut], operation_id="jobs_events",
            summary="A job's state history", responses=problem_responses(401, 404, 422, 503))
def job_events(job_id: uuid.UUID, session: SessionDep, actor: Viewer):
    return [JobEventOut(id=e.id, from_state=JobState(e.from_state) if e.from_state is not None else None,
                        to_state=JobState(e.to_state), reason=e.reason,
                        actor=e.actor, at=e.at) for e in service.list_events(session, actor.team_id, job_id)]


@router.post("/{job_id}/cancel", status_code=202, response_model=JobOut, operation_id="jobs_cancel",
             summary="Cancel a job: it is CANCELLING until the controller has stopped it",
              responses=problem_responses(401, 403, 404, 409, 422, 502, 503))
def cancel_job(job_id: uuid.UUID, request: Request, session: SessionDep, actor: Member):
    state = services(request)
    job = service.cancel_job(session, state.lifecycle, job_id, actor, waker=state.waker)
    state.waker.wake(job.backend)
    return job_out(job, state.backends, pricer=state.pricer,
                   attempts=service.attempts_of(session, job))


@router.post("/{job_id}/relaunch", status_code=201, response_model=JobOut, operation_id="jobs_relaunch",
             summary="Launch a job again: its template version, parameters, overrides, backend and labels, "
                     "with the changes in the body",
             response_description="The new job, stored and QUEUED, like POST /v1/jobs",
             responses=problem_responses(401, 403, 404, 409, 413, 422, 503))
def relaunch_job(job_id: uuid.UUID, request: Request, auth: CachedMember, session: SessionDep,
                 body: JobRelaunch = JobRelaunch(),
                 idempotency_key: Annotated[str | None, Header(
                     max_length=IDEMPOTENCY_KEY_MAX_LENGTH, pattern=IDEMPOTENCY_KEY_PATTERN,
                     description="Retry-safe relaunch: the same key and body return the same job")] = None):
    state = services(request)
    with forgetting_revoked(auth, state.token_cache):
        result = state.submitter.relaunch(session, job_id, body, auth.actor,
                                          idempotency_key=idempotency_key, verify_token=auth.unverified_token)
    headers = {"Location": f"/v1/jobs/{result.job.id}"}
    if result.replayed:
        headers["Idempotent-Replayed"] = "true"
    return _json(job_out(result.job, state.backends, result.compiled, state.pricer), 201, headers)
