"""Routes served with less framework per request, for the busiest endpoints.

A lean route is declared like any other (its signature gives the OpenAPI document and the
full path), but each request is first offered to a `lean` handler: given the request, it
answers it, or returns None when it has any doubt (an unusual header, a query string, a
token it cannot vouch for, input that does not validate). Then the declared path answers,
so every error (401, 403, 422 and its detail) is FastAPI's own and each check has one
definition. A lean handler reads and writes nothing before it decides.

What it saves: FastAPI's dependency solving and the AsyncExitStack driving yield
dependencies (about a fifth of a submit's CPU, bench/submit_vs_floor.py), and the trips
through the thread pool: the declared GET /v1/jobs/{id} takes four (session, token,
endpoint, commit), each waiting for the event loop and the GIL when the loop is busy
(bench/load.py: 1,000 log followers); the lean one takes one."""
from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from service.core.errors import Unauthorized
from service.persistence.session import unit_of_work
from service.web.container import services

T = TypeVar("T")
Handler = Callable[[Request], Coroutine[Any, Any, Response]]
Lean = Callable[[Request], Awaitable[Response | None]]


def lean_route(lean: Lean) -> type[APIRoute]:
    """An APIRoute class whose requests go to `lean` first (route_class_override=...)."""

    class LeanRoute(APIRoute):
        def get_route_handler(self) -> Handler:
            full = super().get_route_handler()

            async def handler(request: Request) -> Response:
                answer = await lean(request)
                return answer if answer is not None else await full(request)

            return handler

    LeanRoute.__name__ = LeanRoute.__qualname__ = f"LeanRoute[{getattr(lean, '__name__', 'lean')}]"
    return LeanRoute


async def in_thread(request: Request, fn: Callable[..., T], *args, **kwargs) -> T:
    """`fn(*args, **kwargs)` on the lean paths' own threads (Services.lean_threads, one per
    request slot: a request holds one at a time), with the request's context (its request id
    in the logs). asyncio's executor, not anyio's to_thread: a third of the cost on the loop
    (no capacity limiter or cancel scope; the request slots already bound the threads)."""
    call = functools.partial(contextvars.copy_context().run, functools.partial(fn, *args, **kwargs))
    return await asyncio.get_running_loop().run_in_executor(services(request).lean_threads, call)


def bearer_secret(request: Request) -> str | None:
    """The bearer token, parsed as fastapi.security.HTTPBearer does; None if there is none."""
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    return secret if scheme.lower() == "bearer" and secret else None


def in_session(state, work: Callable[..., Response], *args, forget_token: str = "") -> Response:
    """`work(session, *args)` in a unit of work (service.persistence.session), in this one thread (call it
    through in_thread). `forget_token`: the hash of a token taken from the auth cache,
    dropped from it if `work` finds it revoked."""
    with unit_of_work(state.session_factory) as session:
        try:
            return work(session, *args)
        except Unauthorized:
            if forget_token:
                state.token_cache.forget(forget_token)  # revoked since it was cached
            raise
