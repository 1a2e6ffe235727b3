from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.core.schema_base import RequestBody
from service.core.text import PlainText
from service.jobs.schemas import LabelKey, LabelValue, TemplateRef
from service.lifecycle.states import JobState
from service.templates.schemas import MAX_VERSION, TemplateName

ParamName = Annotated[str, StringConstraints(max_length=64)]
Scalar = int | float | str | bool
# Google's limit on label keys; the trainer's metric names are Keras's (val_accuracy, loss...).
MetricName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_./-]{0,127}$")]


class SweepState(str, enum.Enum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"          # its creator's token was revoked: no trial starts until resumed
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


SWEEP_ACTIVE = frozenset({SweepState.RUNNING, SweepState.PAUSED, SweepState.CANCELLING})


class ParameterSpace(RequestBody):
    """One searched parameter: a list of values (grid, or picked uniformly at random), or
    for random search a range (int or float; by default the parameter's declared bounds)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"values": [32, 64, 128]}, {"min": 0.0001, "max": 0.1, "scale": "log"}]})

    values: list[Scalar] | None = Field(None, min_length=1, max_length=10_000)
    min: float | None = Field(None, description="random only: lowest value (default: the declared minimum)")
    max: float | None = Field(None, description="random only: highest value (default: the declared maximum)")
    scale: Literal["linear", "log"] = Field("linear", description="random only: log samples uniformly in "
                                            "log space (positive ranges, e.g. learning rates)")


class Objective(RequestBody):
    metric: MetricName = Field(description="A metric of the trainer's epoch_end lines, e.g. val_accuracy")
    goal: Literal["maximize", "minimize"]


class EarlyStopping(RequestBody):
    """The median rule: stop a running trial whose best objective so far is worse than the
    median of the other trials' at the same epoch."""

    rule: Literal["median"] = "median"
    min_epochs: int = Field(2, ge=1, le=1_000_000, description="Judge a trial only from this epoch on")
    min_trials: int = Field(3, ge=1, le=10_000, description="Judge only against at least this many other "
                            "trials that have reached the same epoch")


class SweepCreate(RequestBody):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "template": "mwms-demo", "algorithm": "grid",
        "parameters": {"learning_rate": {"values": [0.01, 0.001]}, "batch_size": {"values": [32, 64]}},
        "fixed_parameters": {"epochs": 3}, "max_parallel": 2,
        "objective": {"metric": "val_accuracy", "goal": "maximize"}}]})

    template: TemplateName
    template_version: int | None = Field(None, ge=1, le=MAX_VERSION, description="Default: the latest version, "
                                         "fixed at creation for every trial.")
    algorithm: Literal["grid", "random"] = Field(description="grid: every combination of the listed values; "
                                                 "random: trial_count draws from a seeded generator")
    parameters: dict[ParamName, ParameterSpace] = Field(min_length=1, max_length=100,
                                                        description="The search space, by parameter name")
    trial_count: int | None = Field(None, ge=1, description="random only: how many trials")
    # 2^53-1: a larger integer is not exact in JSON for many clients (JavaScript's numbers), nor in the
    # OpenAPI document (FastAPI writes bounds as floats); the service draws its own seeds below 2^53.
    seed: int | None = Field(None, ge=0, le=2**53 - 1, description="random only, 0 to 2^53-1: the same seed gives "
                             "the same trials. Default: one chosen at creation and shown in the sweep")
    fixed_parameters: dict[ParamName, Scalar] = Field(default_factory=dict, max_length=100,
                                                      description="Values every trial gets")
    overrides: Any = Field(None, description="JSON merge patch over the template spec, for every trial")
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64,
                                               description="Labels of every trial's job")
    backend: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] | None = None
    display_name: Annotated[str, StringConstraints(min_length=1, max_length=100), PlainText] | None = Field(
        None, description="Default: <template>-sweep-<short id>. Trial jobs are named <display_name>-<n>.")
    max_parallel: int = Field(1, ge=1, description="Unfinished trials at most at once")
    objective: Objective
    early_stopping: EarlyStopping | None = Field(None, description="Off unless given")


class TrialOut(BaseModel):
    number: int
    parameters: dict[str, Scalar]
    state: JobState | Literal["WAITING"] = Field(description="WAITING: not launched yet; else its job's state "
                                                 "(FAILED also when its job could not be created: see error)")
    job_id: uuid.UUID | None = None
    objective_value: float | None = Field(None, description="The best value of the objective over the "
                                          "trial's epochs (highest when maximizing, lowest when minimizing)")
    objective_epoch: int | None = Field(None, description="The epoch that reported objective_value")
    last_value: float | None = Field(None, description="The objective in the trial's latest epoch")
    error: str | None = None
    stopped_early: str | None = Field(None, description="Why the sweep stopped this trial early")


class SweepSummary(BaseModel):
    id: uuid.UUID
    display_name: str
    template: TemplateRef
    backend: str
    algorithm: str
    state: SweepState
    state_reason: str | None = Field(None, description="Why the sweep is PAUSED (its creator's token was "
                                     "revoked; POST /v1/sweeps/{id}/resume starts its trials again as the caller)")
    objective: Objective
    max_parallel: int
    trial_count: int
    counts: dict[str, int] = Field(description="Trials by state (WAITING: not launched yet)")
    best: TrialOut | None = Field(None, description="The trial with the best objective value so far")
    created_by: str
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None


class SweepOut(SweepSummary):
    seed: int | None
    search: dict[str, Any] = Field(description="The search as requested: parameters, fixed_parameters, "
                                   "overrides, labels")
    trials: list[TrialOut] = Field(description="Ranked: trials with an objective value best first, then the "
                                   "rest by number")


class SweepPage(BaseModel):
    items: list[SweepSummary]
    next_cursor: str | None = None
