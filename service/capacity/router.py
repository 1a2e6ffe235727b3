"""The operator's shared-capacity settings over HTTP: capacity per backend, team shares,
priority classes, and the audit log of their changes (docs/queue.md). Reading is open to every
token (a member sees the classes it may use and its own team's shares); changing needs an
operator token."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from sqlalchemy import event
from sqlalchemy.orm import Session

from service.auth.deps import Operator, Viewer
from service.capacity import store
from service.capacity.schemas import (
    AuditPage,
    CapacityIn,
    CapacityOut,
    PriorityClassIn,
    PriorityClassOut,
    ShareIn,
    ShareOut,
)
from service.capacity.settings import CapacitySettings
from service.core.errors import NotFound
from service.lifecycle.protocol import SharesCapacity
from service.web.container import SessionDep, services
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1", tags=["capacity"])
BackendName = Annotated[str, Path(pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="An enabled backend")]
TeamName = Annotated[str, Path(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
ClassName = Annotated[str, Path(pattern=r"^[a-z][a-z0-9-]{0,62}$")]


def _settings(request: Request) -> CapacitySettings:
    return services(request).capacity_settings


def _offered(request: Request, backend: str) -> dict[str, int]:
    b = services(request).backends.get(backend)
    if b is None:
        raise NotFound(f"no backend {backend!r} is enabled here; enabled: {', '.join(sorted(services(request).backends))}")
    return b.offered_capacity() if isinstance(b, SharesCapacity) else {}   # the optional role


def _changed(request: Request, session: Session) -> None:
    """Once the change is committed (the unit of work commits after the route returns): the
    cached capacity is dropped and the controller looks at the waiting jobs again. Done before
    the commit, a reader or a woken pass could read the old rows and keep them (issue 50.4)."""
    state = services(request)

    def after(_session) -> None:
        state.capacity_cache.clear()
        state.waker.wake(None)
    event.listen(session, "after_commit", after, once=True)


@router.get("/capacity", response_model=list[CapacityOut], operation_id="capacity_list",
            summary="Every enabled backend's capacity", responses=problem_responses(401, 503))
def list_capacity(request: Request, session: SessionDep, actor: Viewer):
    return [store.capacity(session, name, _offered(request, name), _settings(request))
            for name in sorted(services(request).backends)]


@router.get("/capacity/{backend}", response_model=CapacityOut, operation_id="capacity_get",
            summary="A backend's capacity: what it may run at once, per resource",
            responses=problem_responses(401, 404, 422, 503))
def get_capacity(backend: BackendName, request: Request, session: SessionDep, actor: Viewer):
    return store.capacity(session, backend, _offered(request, backend), _settings(request))


@router.put("/capacity/{backend}", response_model=CapacityOut, operation_id="capacity_set",
            summary="Set a backend's capacity (operator); audited",
            responses=problem_responses(401, 403, 404, 413, 422, 503))
def set_capacity(backend: BackendName, body: CapacityIn, request: Request, session: SessionDep, actor: Operator):
    offered = _offered(request, backend)
    store.set_capacity(session, backend, dict(body.resources), actor.name, services(request).backends,
                       _settings(request))
    session.flush()
    _changed(request, session)
    return store.capacity(session, backend, offered, _settings(request))


@router.delete("/capacity/{backend}", status_code=204, operation_id="capacity_reset",
               summary="Forget the capacity set through the API: the settings' default applies (operator); audited",
               responses=problem_responses(401, 403, 404, 422, 503))
def reset_capacity(backend: BackendName, request: Request, session: SessionDep, actor: Operator):
    _offered(request, backend)
    store.reset_capacity(session, backend, actor.name, services(request).backends, _settings(request))
    _changed(request, session)
    return Response(status_code=204)


@router.get("/shares", response_model=list[ShareOut], operation_id="shares_list",
            summary="Team shares (an operator sees every team's, others their own team's)",
            responses=problem_responses(401, 422, 503))
def list_shares(session: SessionDep, actor: Viewer, backend: Annotated[str | None, Query(max_length=32)] = None):
    return store.shares(session, team=None if actor.can("operator") else actor.team, backend=backend)


@router.get("/teams/{team}/shares/{backend}", response_model=ShareOut, operation_id="shares_get",
            summary="A team's share of a backend (the team's tokens, or an operator)",
            responses=problem_responses(401, 404, 422, 503))
def get_share(team: TeamName, backend: BackendName, request: Request, session: SessionDep, actor: Viewer):
    if team != actor.team and not actor.can("operator"):
        raise NotFound(f"no team named {team!r}")   # another team's share is not this token's to see
    _offered(request, backend)
    return store.share(session, team, backend)


@router.put("/teams/{team}/shares/{backend}", response_model=ShareOut, operation_id="shares_set",
            summary="Set a team's share of a backend: nominal quota, borrowing and lending limits, weight "
                    "(operator); audited", responses=problem_responses(401, 403, 404, 413, 422, 503))
def set_share(team: TeamName, backend: BackendName, body: ShareIn, request: Request, session: SessionDep,
              actor: Operator):
    out = store.set_share(session, team, backend, body, actor.name, services(request).backends, _settings(request))
    _changed(request, session)
    return out


@router.delete("/teams/{team}/shares/{backend}", status_code=204, operation_id="shares_delete",
               summary="Remove a team's share (nominal 0, no limits, weight 1) (operator); audited",
               responses=problem_responses(401, 403, 404, 422, 503))
def delete_share(team: TeamName, backend: BackendName, request: Request, session: SessionDep, actor: Operator):
    store.delete_share(session, team, backend, actor.name)
    _changed(request, session)
    return Response(status_code=204)


@router.get("/priority-classes", response_model=list[PriorityClassOut], operation_id="priority_classes_list",
            summary="The priority classes, highest first, each saying whether the caller's team may use it",
            responses=problem_responses(401, 503))
def list_classes(session: SessionDep, actor: Viewer):
    return store.classes(session, actor.team)


@router.get("/priority-classes/{name}", response_model=PriorityClassOut, operation_id="priority_classes_get",
            summary="One priority class", responses=problem_responses(401, 404, 422, 503))
def get_class(name: ClassName, session: SessionDep, actor: Viewer):
    return store.priority_class(session, name, actor.team)


@router.put("/priority-classes/{name}", response_model=PriorityClassOut, operation_id="priority_classes_set",
            summary="Create or change a priority class (operator); audited",
            responses=problem_responses(401, 403, 413, 422, 503))
def set_class(name: ClassName, body: PriorityClassIn, request: Request, session: SessionDep, actor: Operator):
    out = store.set_class(session, name, body, actor.name, actor.team, _settings(request))
    _changed(request, session)
    return out


@router.delete("/priority-classes/{name}", status_code=204, operation_id="priority_classes_delete",
               summary="Delete a priority class (operator); jobs already submitted keep their priority; audited",
               responses=problem_responses(401, 403, 404, 422, 503))
def delete_class(name: ClassName, request: Request, session: SessionDep, actor: Operator):
    store.delete_class(session, name, actor.name)
    _changed(request, session)
    return Response(status_code=204)


@router.get("/audit", response_model=AuditPage, operation_id="audit_list",
            summary="Changes to capacity, team shares and priority classes, newest first (operator)",
            responses=problem_responses(401, 403, 422, 503))
def audit(session: SessionDep, actor: Operator, limit: Annotated[int, Query(ge=1, le=500)] = 100,
          before: Annotated[int | None, Query(ge=1)] = None,
          action: Annotated[str | None, Query(max_length=64)] = None):
    return store.audit_page(session, limit=limit, before=before, action=action)
