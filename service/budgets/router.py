from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from service.auth.deps import Admin, Viewer
from service.budgets import service
from service.budgets.schemas import LimitsIn, LimitsOut, UsageOut
from service.web.container import SessionDep, services
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1/teams", tags=["teams"])
TeamName = Annotated[str, Path(pattern=r"^[a-z][a-z0-9-]{0,62}$", description="Your token's team")]


@router.get("/{team}/limits", response_model=LimitsOut, operation_id="teams_limits_get",
            summary="The team's limits: concurrent jobs, accelerators by type, spend per month",
            responses=problem_responses(401, 404, 422, 503))
def get_limits(team: TeamName, request: Request, session: SessionDep, actor: Viewer):
    service.check_team(actor.team, team)
    return service.get_limits(session, actor.team_id, team, services(request).pricer.table.currency)


@router.put("/{team}/limits", response_model=LimitsOut, operation_id="teams_limits_set",
            summary="Set the team's limits (admin of the team); null or left out: no limit",
            responses=problem_responses(401, 403, 404, 413, 422, 503))
def set_limits(team: TeamName, body: LimitsIn, request: Request, session: SessionDep, actor: Admin):
    service.check_team(actor.team, team)
    svc = services(request)
    out = service.set_limits(session, actor.team_id, team, body, actor.name, svc.pricer.table.currency,
                             max_types=svc.budget_settings.max_accelerator_types)
    # The controller looks at waiting jobs again at once: a raised limit may let them go.
    svc.waker.wake(None)
    return out


@router.get("/{team}/usage", response_model=UsageOut, operation_id="teams_usage",
            summary="The team's use against its limits (estimates)",
            responses=problem_responses(401, 404, 422, 503))
def usage(team: TeamName, request: Request, session: SessionDep, actor: Viewer):
    service.check_team(actor.team, team)
    return service.usage(session, actor.team_id, team, services(request).pricer.table.currency)
