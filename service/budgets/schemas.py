from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from service.core.schema_base import RequestBody

AcceleratorName = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")]
# A spend as a string: plain digits, at most 6 decimals (what the number form allows too).
SPEND_TEXT = r"^((0|[1-9][0-9]{0,11})(\.[0-9]{1,6})?|1000000000000(\.0{1,6})?)$"


def _spend_text(value):
    if isinstance(value, str) and not re.fullmatch(SPEND_TEXT, value):
        raise ValueError("write a spend as digits with at most 6 decimals, e.g. \"2500.00\"")
    return value


Spend = Annotated[Decimal, BeforeValidator(_spend_text), Field(ge=0, le=Decimal("1e12"), decimal_places=6)]


class LimitsIn(RequestBody):
    """A team's limits, all of them at once: a field left out or null is no limit."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [{
        "max_concurrent_jobs": 4, "max_accelerators": {"NVIDIA_TESLA_T4": 8},
        "max_monthly_spend": "2500.00", "on_exceed": "refuse"}]})

    max_concurrent_jobs: int | None = Field(None, ge=0, le=1_000_000,
                                            description="Jobs of the team launched or waiting to launch at once")
    max_accelerators: dict[AcceleratorName, Annotated[int, Field(ge=0, le=1_000_000)]] = Field(
        default_factory=dict, json_schema_extra={"additionalProperties": False},
        description="Accelerators in use at once, by type (all replicas of all active jobs), "
                    "e.g. {\"NVIDIA_TESLA_T4\": 8}; types not named are not limited")
    max_monthly_spend: Spend | None = Field(
        None, json_schema_extra={"anyOf": [
            {"type": "number", "minimum": 0, "maximum": 1e12, "multipleOf": 0.000001},
            {"type": "string", "pattern": SPEND_TEXT}, {"type": "null"}]},
        description="Estimated spend per calendar month (UTC), in the price table's currency "
                    "(docs/cost.md: how it is counted); at most 6 decimals")
    on_exceed: Literal["refuse", "queue"] = Field(
        "refuse", description="refuse: POST /v1/jobs answers 409 naming the limit; queue: the job is "
                              "accepted and waits in QUEUED (waiting_reason says why) until use drops")


class LimitsOut(BaseModel):
    team: str
    max_concurrent_jobs: int | None
    max_accelerators: dict[str, int]
    max_monthly_spend: Decimal | None
    currency: str
    on_exceed: str
    updated_at: datetime | None
    updated_by: str | None


class LimitUse(BaseModel):
    limit: str = Field(description="e.g. max_concurrent_jobs, max_accelerators.NVIDIA_TESLA_T4, max_monthly_spend")
    use: Decimal
    max: Decimal | None = Field(description="null: no limit")


class UsageOut(BaseModel):
    team: str
    at: datetime
    month_start: datetime
    currency: str
    jobs: int = Field(description="Active jobs (QUEUED to CANCELLING)")
    launched_jobs: int = Field(description="Of those, launched or being launched")
    accelerators: dict[str, int] = Field(description="Accelerators of the active jobs, by type")
    spend: Decimal = Field(description="This month: accrued cost of jobs that ended, plus the estimate to "
                                       "timeout of active ones (docs/cost.md)")
    spend_unpriced_jobs: int = Field(description="Jobs counted in spend whose estimate lacked a price "
                                                 "(their unpriced parts count as 0)")
    limits: list[LimitUse]
    on_exceed: str | None
    note: str
