"""What GET /v1/usage answers (service/usage/service.py builds it)."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Step = Literal["hour", "day"]


class Point(BaseModel):
    at: datetime = Field(description="The start of the hour (or UTC day) the units were used in")
    units: float = Field(description="Billing units used then (not decayed)")


class Series(BaseModel):
    backend: str
    points: list[Point] = Field(description="Oldest first; a period with no use is left out")


class TeamUsage(BaseModel):
    team: str
    units: float = Field(description="Decayed use over every backend, as of `computed_at`: what fair share reads")
    share: float = Field(description="`units` as a part of every team's (0 to 1; 0 when nobody used anything)")
    backends: dict[str, float] = Field(description="Decayed use per backend, as of `computed_at`")
    series: list[Series] | None = Field(description="Use per backend over time (`hours` back, by `step`): your "
                                                    "own team's, or every team's for an operator; null for "
                                                    "another team's")


class UsageReport(BaseModel):
    computed_at: datetime | None = Field(description="The controller's last recompute (null: none yet)")
    half_life_seconds: float | None = Field(description="The half-life it decayed use with")
    billing_weights: dict[str, float] = Field(description="The billing units per resource-hour it counted with")
    kept_hours: int = Field(description="How far back hourly use is kept (10 half-lives)")
    total_units: float = Field(description="Every team's decayed use, summed")
    teams: list[TeamUsage] = Field(description="Most decayed use first")
    next_offset: int | None = Field(description="Pass it as `offset` for the next page; null: no more")
