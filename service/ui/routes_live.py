"""Server-Sent Events for the pages: job changes (the shared feed) and a job's logs.

The log stream is the API's own (service/logs/fanout.py, the same events as
`GET /v1/jobs/{id}/logs?follow=true`), signed in by the UI's cookie instead of
a bearer header, which browsers' EventSource cannot send. Streams end after
TRAINJOBS_UI_STREAM_MAX_SECONDS and the browser reconnects where it left off;
a server that stops ends them at once with a `reconnect` event."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from service.logs import service as logs
from service.persistence.session import SessionDep
from service.ui.deps import User
from service.ui.feed import JobFeed
from service.ui.routing import HtmlRoute

router = APIRouter(prefix="/ui", route_class=HtmlRoute, include_in_schema=False)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Content-Type-Options": "nosniff"}


def feed_of(app) -> JobFeed:
    feed = getattr(app.state, "ui_feed", None)
    if feed is None:
        feed = app.state.ui_feed = JobFeed(app.state.session_factory, app.state.settings.ui_stream_interval_seconds)
    return feed


def _parse_time(value: str | None) -> datetime | None:
    if not value or len(value) > 64:
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _event(kind: str, data: dict, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _next(queue: asyncio.Queue, stopping: asyncio.Event | None, timeout: float) -> dict | None:
    """The next change, or None after `timeout` or once the service is stopping."""
    get = asyncio.ensure_future(queue.get())
    waits = {get} | ({asyncio.ensure_future(stopping.wait())} if stopping is not None else set())
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return get.result() if get in done else None


@router.get("/stream")
async def job_changes(request: Request, user: User,
                      since: Annotated[str | None, Query(max_length=64)] = None,
                      job: uuid.UUID | None = None,
                      last_event_id: Annotated[str | None, Header(max_length=64)] = None):
    """`event: job` for each change of the team's jobs (or of one job); `id:` is the
    change's updated_at, so a reconnect catches up from the last one seen."""
    feed = feed_of(request.app)
    settings = request.app.state.settings
    start = _parse_time(last_event_id) or _parse_time(since) or datetime.now(UTC)
    team = user.actor.team_id

    stopping = getattr(request.app.state, "stopping", None)  # service/app.py: set when the server stops

    async def body() -> AsyncIterator[str]:
        deadline = time.monotonic() + settings.ui_stream_max_seconds
        sub = feed.subscribe(team, job)  # before the catch-up read, so nothing falls between the two
        try:
            yield "retry: 2000\n: job changes\n\n"
            for caught in await anyio.to_thread.run_sync(feed.catch_up, team, job, start):
                yield _event("job", caught, caught["updated_at"])
            while time.monotonic() < deadline:
                if sub.overflowed:
                    yield _event("reload", {"reason": "too many changes at once"})
                    return
                if stopping is not None and stopping.is_set():
                    yield _event("reconnect", {"reason": "the service is stopping; reconnect to resume"})
                    return
                change = await _next(sub.queue, stopping, min(settings.logs_heartbeat_seconds,
                                                              max(deadline - time.monotonic(), 0.01)))
                if change is None:
                    yield ": keep-alive\n\n"
                    continue
                yield _event("job", change, change["updated_at"])
        finally:
            feed.unsubscribe(sub)

    return StreamingResponse(body(), media_type="text/event-stream", headers=SSE_HEADERS)


@router.get("/jobs/{job_id}/logs/stream")
async def follow_logs(job_id: uuid.UUID, request: Request, user: User, session: SessionDep,
                      replica: Annotated[str | None, Query(max_length=64)] = None,
                      since: Annotated[str | None, Query(max_length=8192)] = None,
                      last_event_id: Annotated[str | None, Header(max_length=8192)] = None):
    state = request.app.state
    team = user.actor.team_id
    view = await anyio.to_thread.run_sync(logs.view_of, session, team, job_id)
    await anyio.to_thread.run_sync(session.close)  # no connection held for the stream's life
    backend = logs.backend_of(state.backends, view)
    cursor = last_event_id or since
    limit = 1000
    page = await anyio.to_thread.run_sync(logs.read, backend, view.handle, replica, cursor, limit)
    # The API's shared reader (service/logs/fanout.py): the same events, memory bounds and
    # `reconnect` on stopping; the stream ends after TRAINJOBS_UI_STREAM_MAX_SECONDS and the
    # browser reconnects with Last-Event-ID, the last line's cursor.
    body = state.log_hub.follow(backend, view, team, replica, page, cursor, limit,
                                max_seconds=state.settings.ui_stream_max_seconds)
    return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)
