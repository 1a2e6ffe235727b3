from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from service.auth.deps import Member, Viewer
from service.core.pagination import decode_time_cursor
from service.sweeps import service
from service.sweeps.schemas import SweepCreate, SweepOut, SweepPage, SweepState
from service.web.container import SessionDep, services
from service.web.lookup import Cursor, IdPrefix, NameFilter
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1/sweeps", tags=["sweeps"])


@router.post("", status_code=201, response_model=SweepOut, operation_id="sweeps_create",
             summary="Start a sweep: one job per trial over a search space of a template's parameters",
             response_description="The sweep, RUNNING; the controller starts its trials as room frees",
             responses={200: {"model": SweepOut, "description": "Dry run: the sweep and its trials as they "
                                                                "would be; nothing stored"},
                        **problem_responses(401, 403, 404, 409, 413, 422, 503)})
def create_sweep(body: SweepCreate, request: Request, session: SessionDep, actor: Member,
                 dry_run: Annotated[bool, Query(description="Check every trial and plan them; store nothing.")]
                 = False):
    svc = services(request)
    sweep = service.create_sweep(session, svc.backends, svc.lifecycle, body,
                                 template_cache=svc.template_cache, default_backend=svc.job_settings.default_backend,
                                 pricer=svc.pricer, actor=actor, limits=svc.sweep_limits,
                                 dry_run=dry_run)
    out = service.sweep_out(session, sweep)
    if dry_run:
        return Response(out.model_dump_json(), status_code=200, media_type="application/json")
    svc.waker.wake(service.LAUNCHER)
    return Response(out.model_dump_json(), status_code=201, media_type="application/json",
                    headers={"Location": f"/v1/sweeps/{sweep.id}"})


@router.get("", response_model=SweepPage, operation_id="sweeps_list", summary="List sweeps, newest first",
            responses=problem_responses(401, 422, 503))
def list_sweeps(session: SessionDep, actor: Viewer,
                state: Annotated[list[SweepState], Query(description="Repeat for several states")] = [],
                id_prefix: IdPrefix = None, name: NameFilter = None,
                limit: Annotated[int, Query(ge=1, le=100)] = 20,
                cursor: Cursor = None):
    if cursor:
        decode_time_cursor(cursor)  # a forged cursor is a 422 before any query sees it
    sweeps, next_cursor = service.list_sweeps(session, actor.team_id, states=state, limit=limit, cursor=cursor,
                                                id_prefix=id_prefix, name=name)
    return SweepPage(items=[service.sweep_summary(session, s) for s in sweeps], next_cursor=next_cursor)


@router.get("/{sweep_id}", response_model=SweepOut, operation_id="sweeps_get",
            summary="A sweep: its state, trials ranked by the objective, the best so far, counts by state",
            responses=problem_responses(401, 404, 422, 503))
def get_sweep(sweep_id: uuid.UUID, session: SessionDep, actor: Viewer):
    return service.sweep_out(session, service.get_sweep(session, actor.team_id, sweep_id))


@router.post("/{sweep_id}/resume", response_model=SweepOut, operation_id="sweeps_resume",
             summary="Resume a PAUSED sweep (its creator's token was revoked): its further trials run as the caller",
             responses=problem_responses(401, 403, 404, 409, 422, 503))
def resume_sweep(sweep_id: uuid.UUID, request: Request, session: SessionDep, actor: Member):
    sweep = service.resume_sweep(session, sweep_id, actor)
    services(request).waker.wake(service.LAUNCHER)
    return service.sweep_out(session, sweep)


@router.post("/{sweep_id}/cancel", status_code=202, response_model=SweepOut, operation_id="sweeps_cancel",
             summary="Cancel a sweep: no more trials start, unfinished ones are cancelled",
             responses=problem_responses(401, 403, 404, 409, 422, 503))
def cancel_sweep(sweep_id: uuid.UUID, request: Request, session: SessionDep, actor: Member):
    svc = services(request)
    sweep = service.cancel_sweep(session, svc.lifecycle, sweep_id, actor)
    svc.waker.wake(None)
    return service.sweep_out(session, sweep)
