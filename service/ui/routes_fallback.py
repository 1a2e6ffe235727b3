"""Any other /ui address: a page saying so (not the API's problem+json)."""
from __future__ import annotations

from fastapi import APIRouter, Request

from service.core.errors import NotFound
from service.ui.deps import SignInRequired, ui_user
from service.ui.routing import HtmlRoute
from service.web.container import SessionDep

router = APIRouter(prefix="/ui", route_class=HtmlRoute, include_in_schema=False)


@router.get("/{path:path}")
def not_found(path: str, request: Request, session: SessionDep):
    try:
        ui_user(request, session)  # signed in: the page keeps its header
    except SignInRequired:
        pass
    raise NotFound("there is no such page; the jobs are at /ui/jobs, the templates at /ui/templates")
