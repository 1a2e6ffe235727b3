"""Server-Sent Events for the pages: job changes (the shared feed) and a job's logs.

The log stream is the API's own (service.logs.follow, the same events as
`GET /v1/jobs/{id}/logs?follow=true`), signed in by the UI's cookie instead of
a bearer header, which browsers' EventSource cannot send. Streams end after
TRAINJOBS_UI_STREAM_MAX_SECONDS and the browser reconnects where it left off,
so a server shutting down is never held open by a tab."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timezone
from typing import Annotated, AsyncIterator

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from service.db import SessionDep
from service.logs import service as logs
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


@router.get("/stream")
async def job_changes(request: Request, user: User,
                      since: Annotated[str | None, Query(max_length=64)] = None,
                      job: uuid.UUID | None = None,
                      last_event_id: Annotated[str | None, Header(max_length=64)] = None):
    """`event: job` for each change of the team's jobs (or of one job); `id:` is the
    change's updated_at, so a reconnect catches up from the last one seen."""
    feed = feed_of(request.app)
    settings = request.app.state.settings
    start = _parse_time(last_event_id) or _parse_time(since) or datetime.now(timezone.utc)
    team = user.actor.team_id

    async def body() -> AsyncIterator[str]:
        deadline = time.monotonic() + settings.ui_stream_max_seconds
        sub = feed.subscribe(team, job)  # before the catch-up read, so nothing falls between the two
        try:
            yield "retry: 2000\n: job changes\n\n"
            for change in await anyio.to_thread.run_sync(feed.catch_up, team, job, start):
                yield _event("job", change, change["updated_at"])
            while time.monotonic() < deadline:
                if sub.overflowed:
                    yield _event("reload", {"reason": "too many changes at once"})
                    return
                try:
                    change = await asyncio.wait_for(sub.queue.get(), timeout=settings.logs_heartbeat_seconds)
                except asyncio.TimeoutError:
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
    s = state.settings
    cfg = logs.FollowSettings(interval=s.logs_follow_interval_seconds, heartbeat=s.logs_heartbeat_seconds)
    stream = logs.follow(state.session_factory, team, backend, view, replica, page, cursor, limit, cfg,
                         request.is_disconnected)

    async def bounded() -> AsyncIterator[str]:
        deadline = time.monotonic() + s.ui_stream_max_seconds
        try:
            async for chunk in stream:
                yield chunk
                if time.monotonic() > deadline:
                    return  # the browser reconnects with Last-Event-ID, the last line's cursor
        finally:
            await stream.aclose()

    return StreamingResponse(bounded(), media_type="text/event-stream", headers=SSE_HEADERS)
