"""The lean paths of the busiest job routes (service/web/lean_route.py explains the scheme).

POST /v1/jobs: a plain submit — JSON body, a cached member token, no query string, a
well-formed Idempotency-Key or none — validated once from its bytes, the token from the
auth cache (its revocation still checked in the submit's first query), the work done in
one trip through the thread pool.

GET /v1/jobs/{id}: no query string and a bearer token: the token, the job and its
attempts read in one trip through the thread pool (the token from the database, as the
declared path does)."""
from __future__ import annotations

import uuid
from collections.abc import Callable

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from service.auth.service import hash_token, resolve, unknown_token
from service.jobs.schemas import JobCreate
from service.jobs.submitter import is_idempotency_key
from service.web.lean_route import bearer_secret, in_session, in_thread

_JOB_ID = TypeAdapter(uuid.UUID)   # the path parameter, parsed as the declared path parses it


def lean_submit(submit: Callable[..., Response]):
    """`submit(state, session, actor, body, idempotency key, token hash to verify)`: the
    endpoint's work given its inputs (router.submit)."""

    async def submit_plain(request: Request) -> Response | None:
        if request.scope.get("query_string"):
            return None
        headers = request.headers
        if headers.get("content-type", "").lower() != "application/json":
            return None
        secret = bearer_secret(request)
        key = headers.get("idempotency-key")
        if secret is None or key is not None and not is_idempotency_key(key):
            return None
        token_hash = hash_token(secret)
        state = request.app.state
        actor = state.token_cache.get(token_hash)
        if actor is None or not actor.can("member"):
            return None
        try:
            body = JobCreate.model_validate_json(await request.body())
        except ValidationError:
            return None  # the 422 and its detail come from the declared path
        return await in_thread(request, in_session, state, _submit_work, submit, state, actor, body, key,
                               token_hash, forget_token=token_hash)

    return submit_plain


def _submit_work(session, submit, state, actor, body, key, token_hash) -> Response:
    return submit(state, session, actor, body, key, token_hash)


def lean_view(view: Callable[..., Response]):
    """`view(state, session, actor, job_id)`: the endpoint's work given its inputs (router.view)."""

    async def view_plain(request: Request) -> Response | None:
        secret = bearer_secret(request)
        if request.scope.get("query_string") or secret is None:
            return None
        try:
            job_id = _JOB_ID.validate_python(request.path_params.get("job_id"))
        except ValidationError:
            return None
        state = request.app.state
        return await in_thread(request, in_session, state, _view_work, view, state, secret, job_id)

    return view_plain


def _view_work(session, view, state, secret: str, job_id: uuid.UUID) -> Response:
    actor = resolve(session, secret)
    if actor is None:
        raise unknown_token()
    return view(state, session, actor, job_id)   # every role may read
