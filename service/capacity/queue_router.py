"""GET /v1/queue: each backend's capacity, each team's use of it, and the waiting jobs in the
order the controller's planner would start them, with why (service/capacity/queue.py). Any
token may read it; another team's waiting jobs show only their team, position, priority and
demand."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from service.auth.deps import Viewer
from service.capacity import queue_pages
from service.capacity.queue_schemas import QueueList
from service.core.errors import NotFound, Problem
from service.web.container import SessionDep, services
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1/queue", tags=["queue"])

DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


@router.get("", response_model=QueueList, operation_id="queue_get",
            summary="Each backend's capacity, use per team, and the waiting jobs in order with why",
            responses=problem_responses(401, 404, 422, 503))
def get_queue(request: Request, session: SessionDep, actor: Viewer,
              backend: Annotated[str | None, Query(min_length=1, max_length=64,
                                                   description="One backend (default: every enabled one)")] = None,
              limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Waiting entries per backend")] = DEFAULT_LIMIT,
              offset: Annotated[int, Query(ge=0, le=10_000_000, description="Skip this many waiting entries "
                                                                            "(next_offset of the last answer)")] = 0):
    svc = services(request)
    enabled = sorted(svc.backends)
    if backend is not None and backend not in svc.backends:
        raise NotFound(f"backend {backend!r} is not enabled here; enabled: {', '.join(enabled) or 'none'}",
                       problems=[Problem("backend", "not an enabled backend", fix=f"one of: {', '.join(enabled)}")],
                       enabled=enabled)
    # Ready JSON (capacity/queue_pages.py): the same QueueList, without building 1,000 models a read.
    pages = [svc.queue.prepared(name).page_json(session, actor.team, actor.team_id, limit=limit, offset=offset)
             for name in ([backend] if backend is not None else enabled)]
    return Response(queue_pages.list_json(pages), media_type="application/json")
