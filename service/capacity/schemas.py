"""The shared-capacity API's bodies: capacity per backend, team shares, priority classes, the audit log."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.core.schema_base import RequestBody

# "core", "gpu", "vcpu", or "gpu:<ACCELERATOR_TYPE>" (Vertex AI's names, e.g. gpu:NVIDIA_TESLA_A100).
RESOURCE_PATTERN = r"^(core|gpu|vcpu|gpu:[A-Z][A-Z0-9_]{0,63})$"
Resource = Annotated[str, StringConstraints(pattern=RESOURCE_PATTERN)]
Count = Annotated[int, Field(ge=0, le=1_000_000_000)]
Counts = dict[Resource, Count]
ClassName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
TeamName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
_RESOURCES = ('{"core": 8}, {"gpu:NVIDIA_TESLA_A100": 16, "vcpu": 512}: core (this machine\'s cores), gpu, vcpu, '
              'gpu:<ACCELERATOR_TYPE>')


class CapacityIn(RequestBody):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"resources": {"core": 8}}]})
    resources: Counts = Field(description="What the backend may run at once, per resource, e.g. " + _RESOURCES +
                                          ". A resource not named is not arbitrated.")


class CapacityOut(BaseModel):
    backend: str
    resources: dict[str, int]
    source: Literal["api", "settings", "none"] = Field(
        description="api: set with PUT /v1/capacity/{backend}; settings: TRAINJOBS_CAPACITY; none: nothing arbitrated")
    offered: dict[str, int] = Field(description="What the backend could run as far as it can tell (this machine's "
                                                "cores); never applied unless set")
    updated_at: datetime | None = None
    updated_by: str | None = None


class ShareIn(RequestBody):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [
        {"nominal": {"core": 4}, "borrowing_limit": {"core": 2}, "lending_limit": {"core": 2}, "weight": 1.0}]})
    nominal: Counts = Field(default_factory=dict, description="Guaranteed: the team gets it back by preemption "
                                                               "when other teams borrowed it")
    borrowing_limit: Counts = Field(default_factory=dict, description="How much beyond its nominal quota the team "
                                                                      "may use; a resource not named: no limit")
    lending_limit: Counts = Field(default_factory=dict, description="How much of its unused nominal quota others "
                                                                    "may borrow; a resource not named: all of it")
    weight: float = Field(1.0, gt=0, le=1000, description="Fair-share weight (2: twice the share of 1)")


class ShareOut(ShareIn):
    model_config = ConfigDict(extra="forbid")
    team: str
    backend: str
    updated_at: datetime | None = None
    updated_by: str | None = None


class PriorityClassIn(RequestBody):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"value": 100, "preempts": True, "teams": ["vision"], "description": "deadline work"}]})
    value: int = Field(ge=-1_000_000, le=1_000_000, description="Higher goes first within a team")
    preempts: bool = Field(False, description="Its jobs may preempt lower-priority ones (other teams' borrowed "
                                              "jobs, or the team's own)")
    teams: list[TeamName] | None = Field(None, max_length=1000, description="Teams that may use it; null: every team")
    description: Annotated[str, StringConstraints(max_length=500)] = ""


class PriorityClassOut(PriorityClassIn):
    model_config = ConfigDict(extra="forbid")
    name: str
    usable: bool = Field(description="Whether the caller's team may use it")
    updated_at: datetime | None = None
    updated_by: str | None = None


class AuditEventOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    subject: str
    before: dict | None
    after: dict | None


class AuditPage(BaseModel):
    items: list[AuditEventOut]
    next_before: int | None = Field(None, description="Pass as `before` for older events; null: no more")
