"""A route's blocking work in one trip through the thread pool, for the busiest routes
(POST /v1/jobs, GET /v1/jobs/{id}: service.jobs.router). Their handlers are async and do
their database work in one call here, where a sync endpoint with yield dependencies takes
several trips (session, token, endpoint, commit), each waiting for the event loop and the
GIL when the loop is busy (bench/load.py: 1,000 log followers)."""
from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from starlette.requests import Request

from service.web.container import services

T = TypeVar("T")
P = ParamSpec("P")


async def in_thread(request: Request, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on the request threads (Services.request_threads, one per request
    slot: a request holds one at a time), with the request's context (its request id in the
    logs). asyncio's executor, not anyio's to_thread: a third of the cost on the loop (no
    capacity limiter or cancel scope; the request slots already bound the threads)."""
    call = functools.partial(contextvars.copy_context().run, functools.partial(fn, *args, **kwargs))
    return await asyncio.get_running_loop().run_in_executor(services(request).request_threads, call)
