"""The shared-capacity API's bodies: capacity per backend, team shares, priority classes, the audit log."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from service.core.schema_base import RequestBody

# "core", "gpu", "vcpu", or "gpu:<ACCELERATOR_TYPE>" (Vertex AI's names, e.g. gpu:NVIDIA_TESLA_A100).
RESOURCE_PATTERN = r"^(core|gpu|vcpu|gpu:[A-Z][A-Z0-9_]{0,63})$"
Resource = Annotated[str, StringConstraints(pattern=RESOURCE_PATTERN)]
MAX_COUNT = 1_000_000_000
# A share's weight is a ratio against the other teams' (1: the default). The scheduler divides
# by it (service/scheduling/ledger.py fair_key): 5e-324 was accepted and made any use of the team
# an infinite share, tied with every other such team. Between MIN_WEIGHT and MAX_WEIGHT two
# teams' weights differ at most a million-fold.
MIN_WEIGHT = 0.001
MAX_WEIGHT = 1000.0
MAX_MIN_RUNTIME = 7 * 86_400    # a priority class's minimum runtime, seconds: a week


def _json_type(value: object) -> str:
    return {bool: "a boolean", str: "a string", float: "a fractional number", type(None): "null",
            dict: "an object", list: "an array"}.get(type(value), type(value).__name__)


def _whole_number(value: object) -> object:
    """A count or a priority is a JSON integer: `true` is not 1 and "4" is not 4 (Python's lax
    parsing took both), and 2.0 is refused too rather than read as 2, so a client computing a
    count in floating point learns it here instead of sending 2.9999999 one day."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise PydanticCustomError("whole_number", "must be a whole number such as 4, not {got}; send it without "
                                              "quotes or a decimal point", {"got": _json_type(value)})


def _whole_or_null(value: object) -> object:
    return value if value is None else _whole_number(value)


def _real_number(value: object) -> object:
    """A weight is a JSON number (2 or 0.5), never a boolean or a string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise PydanticCustomError("real_number", "must be a number such as 1 or 0.5, not {got}",
                              {"got": _json_type(value)})


def _boolean(value: object) -> object:
    """true or false only: 1 and "yes" were read as true."""
    if isinstance(value, bool):
        return value
    raise PydanticCustomError("boolean", "must be true or false, not {got}", {"got": _json_type(value)})


Count = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_COUNT)]
Counts = dict[Resource, Count]
Weight = Annotated[float, BeforeValidator(_real_number), Field(ge=MIN_WEIGHT, le=MAX_WEIGHT)]
ClassName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
TeamName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
_RESOURCES = ('{"core": 8}, {"gpu:NVIDIA_TESLA_A100": 16, "vcpu": 512}: core (this machine\'s cores), gpu, vcpu, '
              'gpu:<ACCELERATOR_TYPE>')
_NOMINAL = "Guaranteed: the team gets it back by preemption when other teams borrowed it"
_BORROWING = "How much beyond its nominal quota the team may use; a resource not named: no limit"
_LENDING = "How much of its unused nominal quota others may borrow; a resource not named: all of it"
_WEIGHT = f"Fair-share weight (2: twice the share of 1), a number from {MIN_WEIGHT} to {MAX_WEIGHT:g}"
_VALUE = "Higher goes first within a team (a whole number from -1000000 to 1000000)"
_PREEMPTS = "Its jobs may preempt lower-priority ones (other teams' borrowed jobs, or the team's own)"
_TEAMS = "Teams that may use it; null: every team"
_MIN_RUNTIME = ("Seconds its jobs run before a preemption for priority may take them (0 to 604800, a week); "
                "null: the service's TRAINJOBS_SCHEDULER_MIN_RUNTIME_SECONDS (10 minutes by default). A reclaim "
                "of borrowed capacity does not wait for it")


class CapacityIn(RequestBody):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"resources": {"core": 8}}]})
    resources: Counts = Field(description="What the backend may run at once, per resource, e.g. " + _RESOURCES +
                                          ", each a whole number (4, not 4.0 or true). A resource not named is not "
                                          "arbitrated.")


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
    nominal: Counts = Field(default_factory=dict, description=_NOMINAL)
    borrowing_limit: Counts = Field(default_factory=dict, description=_BORROWING)
    lending_limit: Counts = Field(default_factory=dict, description=_LENDING)
    weight: Weight = Field(1.0, description=_WEIGHT)


class ShareOut(BaseModel):
    # Not ShareIn's types: a row stored before the bounds came in (a weight of 5e-324) is still
    # shown as it is, for the operator to correct, rather than failing the read.
    model_config = ConfigDict(extra="forbid")
    nominal: dict[str, int] = Field(default_factory=dict, description=_NOMINAL)
    borrowing_limit: dict[str, int] = Field(default_factory=dict, description=_BORROWING)
    lending_limit: dict[str, int] = Field(default_factory=dict, description=_LENDING)
    weight: float = Field(1.0, description=_WEIGHT)
    team: str
    backend: str
    updated_at: datetime | None = None
    updated_by: str | None = None


class PriorityClassIn(RequestBody):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"value": 100, "preempts": True, "teams": ["vision"], "description": "deadline work"}]})
    value: Annotated[int, BeforeValidator(_whole_number), Field(ge=-1_000_000, le=1_000_000)] = Field(
        description=_VALUE)
    preempts: Annotated[bool, BeforeValidator(_boolean)] = Field(False, description=_PREEMPTS)
    teams: list[TeamName] | None = Field(None, max_length=1000, description=_TEAMS)
    description: Annotated[str, StringConstraints(max_length=500)] = ""
    min_runtime_seconds: Annotated[Annotated[int, Field(ge=0, le=MAX_MIN_RUNTIME)] | None,
                                   BeforeValidator(_whole_or_null)] = Field(None, description=_MIN_RUNTIME)


class PriorityClassOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: int = Field(description=_VALUE)
    preempts: bool = Field(False, description=_PREEMPTS)
    teams: list[str] | None = Field(None, description=_TEAMS)
    description: str = ""
    min_runtime_seconds: int | None = Field(None, description=_MIN_RUNTIME)
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
