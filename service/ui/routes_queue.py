"""/ui/queue: each backend's capacity, each team's use of it and the waiting jobs in order with
why, as GET /v1/queue shows them (the same cached computation, the same privacy: another
team's waiting jobs carry only their team, place, priority and demand)."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from service.core.errors import NotFound
from service.ui import priority, usage_chart
from service.ui.deps import User
from service.ui.render import render
from service.ui.routing import HtmlRoute
from service.ui.settings import refresh_ms
from service.web.container import SessionDep, services

router = APIRouter(prefix="/ui", route_class=HtmlRoute, include_in_schema=False)

MINE_AT_LEAST = 20    # your team's jobs summed up on page 1: a page's worth (TRAINJOBS_UI_PAGE_SIZE), at least this
SOURCE = {"api": "set by an operator", "settings": "from TRAINJOBS_CAPACITY", "none": "none set: nothing arbitrated"}


@router.get("/queue")
def queue_page(request: Request, session: SessionDep, user: User,
               backend: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
               offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0):
    svc = services(request)
    enabled = sorted(svc.backends)
    if backend is not None and backend not in svc.backends:
        raise NotFound(f"backend {backend!r} is not enabled here; enabled: {', '.join(enabled) or 'none'}")
    cache = svc.queue
    limit = svc.ui_settings.page_size
    shown = [backend] if backend is not None else enabled
    queues = [cache.prepared(name).view(session, user.actor.team, user.actor.team_id, limit=limit,
                                        offset=offset if backend is not None else 0) for name in shown]
    # Page 1: the caller's team's waiting jobs wherever they stand, with a jump to each.
    mine = {name: cache.prepared(name).own_places(session, user.actor.team, user.actor.team_id,
                                                  limit=max(limit, MINE_AT_LEAST)) for name in shown} if offset == 0 else {}
    # A backend with no capacity set is held only by its running-jobs limit (max_running): say which.
    limits = {name: svc.backends[name].capabilities.max_running for name in enabled}
    class_names = priority.names_by_value(priority.classes(session, user.actor.team))
    return render(request, "queue.html", user=user, queues=queues, enabled=enabled, selected=backend,
                  sources=SOURCE, limits=limits, class_names=class_names, mine=mine, offset=offset, page=limit,
                  refresh_ms=refresh_ms(svc.queue.seconds),
                  usage=usage_chart.section(session, user.actor, set(svc.backends)))



@router.get("/help/queue")
def queue_help(request: Request, user: User):
    """How to read the queue, priority classes and preemptions (docs/queue.md's user part, served)."""
    return render(request, "help_queue.html", user=user)
