from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from service.auth.deps import CachedViewer
from service.logs import opening, service
from service.logs.schemas import LogLineOut, LogPageOut
from service.web.container import services
from service.web.overload import wants_stream
from service.web.problems import problem_responses
from service.web.request_threads import in_thread

router = APIRouter(prefix="/v1/jobs", tags=["logs"])

SSE_DOC = """Server-Sent Events (with `follow=true` or `Accept: text/event-stream`):
`event: log` per line (`id:` is its cursor, `data:` the line as JSON), comments as heartbeats,
and a last `event: end` whose data holds the job's final state and error. A stream may also end
with `event: resync` (this follower fell behind) or `event: reconnect` (the stream reached
TRAINJOBS_LOGS_STREAM_MAX_SECONDS, or the service is stopping): reconnect with `Last-Event-ID`
(browsers' EventSource do it themselves) to resume after the last line seen. A streamed line
longer than TRAINJOBS_LOGS_STREAM_LINE_MAX_BYTES is cut, ending with `…[trainjobs: line cut
for streaming, N more characters]`; pages keep lines whole."""


# One Server-Sent Event, as a reader parses it (`data` is a JSON text: SSE_DOC says which).
SSE_EVENT = {"type": "object", "properties": {"event": {"type": "string"}, "data": {"type": "string"},
                                              "id": {"type": "string"}, "retry": {"type": "integer"}}}


@router.get("/{job_id}/logs", response_model=LogPageOut, operation_id="jobs_logs",
            summary="A job's replica logs: a page, or a live stream (SSE)", description=SSE_DOC,
            responses={200: {"content": {"text/event-stream": {"schema": SSE_EVENT}}},
                       **problem_responses(401, 404, 409, 422, 429, 502, 503)})
async def job_logs(
        job_id: uuid.UUID, request: Request, auth: CachedViewer,
        replica: Annotated[str | None, Query(max_length=64, description="Only this replica, e.g. workerpool1-0")] = None,
        since: Annotated[str | None, Query(max_length=8192,
                                           description="A cursor from an earlier line or page")] = None,
        limit: Annotated[int, Query(ge=1, le=5000, description="Most lines per page (per SSE read)")] = 1000,
        follow: Annotated[bool, Query(description="Stream as Server-Sent Events until the job ends")] = False,
        accept: Annotated[str | None, Header(include_in_schema=False)] = None,
        last_event_id: Annotated[str | None, Header(max_length=8192, description="SSE resume point")] = None):
    svc = services(request)
    stream = wants_stream(follow, accept)  # the admission layer's rule too (service/web/overload.py)
    cursor = (last_event_id or since) if stream else since
    # The caller from the token cache, the job, the first read (so a bad cursor or replica is a
    # 422, not a broken stream): one trip through the request threads, the session closed
    # before any stream starts (service/logs/opening.py).
    backend, view, page = await in_thread(request, opening.open_logs, svc.session_factory, svc.token_cache,
                                          svc.backends, auth, job_id, replica, cursor, limit)
    if stream:
        # One shared reader per job (and replica filter) serves every follower (service/logs/fanout.py).
        body = svc.log_hub.follow(backend, view, auth.actor.team_id, replica, page, cursor, limit)
        return StreamingResponse(body, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    page = service.cap_page(page, svc.log_settings.page_max_bytes)  # bounded in bytes, not only lines
    return LogPageOut(job_id=job_id, state=view.handle.state, cursor=page.cursor,
                      done=view.final and not page.more and len(page.lines) < limit,
                      lines=[LogLineOut(replica=ln.replica, stream=ln.stream, timestamp=ln.timestamp,
                                        message=ln.message, cursor=ln.cursor) for ln in page.lines])
