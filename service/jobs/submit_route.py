"""POST /v1/jobs served with less framework per request.

The route is declared like any other (its signature gives the OpenAPI document and the full
path), but a plain submit — JSON body, a cached member token, no query string, a well-formed
Idempotency-Key or none — is served here: the body validated once from its bytes, the token
from the auth cache (its revocation still checked in the submit's first query), and the work
done in one trip through the thread pool. FastAPI's dependency solving and the AsyncExitStack
driving a yield dependency cost about a fifth of a submit's CPU (bench/submit_vs_floor.py).

Anything else — a dry run, an unknown token, a malformed header, a body that does not
validate — takes the declared path unchanged, so every error answer (401, 403, 422 and its
detail) is FastAPI's own and there is one definition of each check. Nothing has been read
from or written to the database when the lean path hands over."""
from __future__ import annotations

import re
from typing import Any, Callable, Coroutine

from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from service.auth.service import Actor, hash_token
from service.errors import Unauthorized
from service.jobs.schemas import JobCreate

# The Idempotency-Key header's declared constraints (router.create_job): the same, or the full path.
_KEY = re.compile(r"[\x21-\x7e]{1,255}")

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
# (state, session, actor, body, idempotency key, token hash to verify) -> the 201 Response
Submit = Callable[..., Response]


class LeanSubmitRoute(APIRoute):
    """An APIRoute whose handler tries the lean path first; `lean_submit` is the endpoint's
    work given its inputs (router.submit), run in the thread pool with a session of its own."""

    lean_submit: Submit

    def get_route_handler(self) -> Handler:
        full = super().get_route_handler()
        submit = type(self).lean_submit

        async def handler(request: Request) -> Response:
            inputs = _plain_inputs(request)
            if inputs is None:
                return await full(request)
            actor, token_hash, key = inputs
            try:
                body = JobCreate.model_validate_json(await request.body())
            except ValidationError:
                return await full(request)  # the 422 and its detail come from the declared path
            return await run_in_threadpool(_in_session, submit, request.app.state, actor, token_hash, body, key)

        return handler


def _plain_inputs(request: Request) -> tuple[Actor, str, str | None] | None:
    """(actor, token hash, Idempotency-Key) of a plain submit by a cached member token;
    None when the declared path must decide (and answer any error)."""
    if request.scope.get("query_string"):
        return None
    headers = request.headers
    if headers.get("content-type", "").lower() != "application/json":
        return None
    scheme, _, secret = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        return None
    key = headers.get("idempotency-key")
    if key is not None and not _KEY.fullmatch(key):
        return None
    token_hash = hash_token(secret)
    actor = request.app.state.token_cache.get(token_hash)
    if actor is None or not actor.can("member"):
        return None
    return actor, token_hash, key


def _in_session(submit: Submit, state, actor: Actor, token_hash: str, body: JobCreate,
                key: str | None) -> Response:
    """The unit of work of service.db.get_session, in this one thread."""
    session = state.session_factory()
    try:
        response = submit(state, session, actor, body, key, token_hash)
        if session.in_transaction():  # create_job commits; a commit of nothing still costs a transaction
            session.commit()
        return response
    except BaseException as exc:
        if isinstance(exc, Unauthorized):
            state.token_cache.forget(token_hash)  # revoked since it was cached
        session.rollback()
        raise
    finally:
        session.close()
