"""GET /v1/usage: each team's decayed use (every backend, in billing units) and use over time
(service/usage/service.py). Any token may read it; another team's use over time is an operator's."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from service.auth.deps import Viewer
from service.core.errors import Invalid, Problem
from service.usage import service
from service.usage.billing import HORIZON_HALF_LIVES
from service.usage.schemas import Step, UsageReport
from service.web.container import SessionDep, services
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1/usage", tags=["usage"])

# 10 half-lives of the longest half-life (30 days): nothing older is kept.
MAX_HOURS = HORIZON_HALF_LIVES * 30 * 24
MAX_POINTS = 31 * 24   # hourly points one series may hold: a month; longer spans by the day
MAX_LIMIT = 100
# Points of use over time one answer may carry (an operator's: every team on the page has series).
MAX_ANSWER_POINTS = 20_000


@router.get("", response_model=UsageReport, operation_id="usage_get",
            summary="Each team's decayed use in billing units (fair share's input), and use over time",
            responses=problem_responses(401, 403, 404, 422))
def get_usage(request: Request, session: SessionDep, actor: Viewer,
              backend: Annotated[str | None, Query(min_length=1, max_length=32,
                                                   description="One backend (default: every one)")] = None,
              team: Annotated[str | None, Query(min_length=1, max_length=63, description="One team (another "
                                                "team's: operators only)")] = None,
              hours: Annotated[int, Query(ge=1, le=MAX_HOURS, description="How far back the series go (at "
                                          f"most {MAX_POINTS} with step=hour: longer spans by the day)")] = 168,
              step: Annotated[Step, Query(description="Series points per hour or per UTC day")] = "hour",
              limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Teams per page")] = 20,
              offset: Annotated[int, Query(ge=0, le=1_000_000, description="next_offset of the last page")] = 0):
    if step == "hour" and hours > MAX_POINTS:
        raise Invalid(f"hourly series reach back at most {MAX_POINTS} hours, not {hours}",
                      problems=[Problem("hours", f"over {MAX_POINTS} with step=hour",
                                        fix=f"hours <= {MAX_POINTS}, or step=day")])
    caller = service.Caller(actor.team_id, actor.team, actor.can("operator"))
    per_team = hours if step == "hour" else -(-hours // 24)
    if caller.operator and team is None and limit * per_team > MAX_ANSWER_POINTS:
        raise Invalid(f"{limit} teams' use over {per_team} {step}s is over {MAX_ANSWER_POINTS} points (a backend)",
                      problems=[Problem("limit", f"limit x points per team over {MAX_ANSWER_POINTS}",
                                        fix=f"limit <= {max(1, MAX_ANSWER_POINTS // per_team)}, fewer hours, "
                                            "step=day, or one team")])
    return service.report(session, caller, service.Query(backend, team, hours, step, limit, offset),
                          set(services(request).backends))
