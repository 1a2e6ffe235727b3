from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    WrapValidator,
    field_validator,
)

from service.capacity.queue_schemas import QueuePlace
from service.core.schema_base import RequestBody
from service.core.text import PlainText
from service.cost.schemas import CostEstimate
from service.lifecycle.states import JobState
from service.templates.schemas import MAX_VERSION, TemplateName

LabelKey = Annotated[str, StringConstraints(max_length=64)]      # checked in full by jobspec (Google's rules)
LabelValue = Annotated[str, StringConstraints(max_length=64)]
DISPLAY_NAME_MAX = 128  # Vertex AI's limit, applied on every backend (jobspec checks it too)
DisplayName = Annotated[str, StringConstraints(min_length=1, max_length=DISPLAY_NAME_MAX), PlainText]


class JobCreate(RequestBody):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "template": "mwms-demo", "parameters": {"epochs": 2}, "backend": "local"}]})

    template: TemplateName
    template_version: int | None = Field(None, ge=1, le=MAX_VERSION, description="Default: the latest version.")
    parameters: dict[Annotated[str, StringConstraints(max_length=64)], int | float | str | bool] = Field(
        default_factory=dict, max_length=100)
    overrides: Any = Field(None, description="JSON merge patch (RFC 7396) over the template spec; "
                                             "null removes a key. e.g. {\"workers\": {\"replica_count\": 4}}")
    backend: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] | None = Field(
        None, description="local (default), vertex or slurm")
    display_name: DisplayName | None = Field(
        None, description="At most 128 characters, printable (no control or bidirectional characters). "
                          "Default: <template>-<short id>.")
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64)


class JobRelaunch(RequestBody):
    """Changes to what the earlier job was launched with; everything left out is kept."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "parameters": {"epochs": 5}, "labels": {"try": "2"}}]})

    template_version: int | Literal["latest"] | None = Field(
        None, json_schema_extra={"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_VERSION},
                                           {"type": "string", "const": "latest"}, {"type": "null"}]},
        description='Default: the version the job used; "latest" for the template\'s newest.')
    parameters: dict[Annotated[str, StringConstraints(max_length=64)], int | float | str | bool] = Field(
        default_factory=dict, max_length=100, description="Merged over the job's parameters")
    overrides: Any = Field(None, description="JSON merge patch over the job's own overrides (null in it removes "
                                             "a key, as in the spec); left out: the job's overrides as they were")
    backend: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] | None = None
    display_name: DisplayName | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64,
                                               description="Merged over the job's labels")

    @field_validator("template_version")
    @classmethod
    def _version_bounds(cls, v):
        if isinstance(v, int) and not 1 <= v <= MAX_VERSION:
            raise ValueError(f"a template version is 1 to {MAX_VERSION}, or \"latest\"")
        return v


class AttemptRef(BaseModel):
    id: uuid.UUID
    attempt: int
    state: JobState


class PreemptionRef(BaseModel):
    """One preemption of one attempt of the job (docs/queue.md)."""
    attempt: uuid.UUID = Field(description="The attempt that was preempted")
    at: datetime | None = Field(None, description="When the controller asked it to stop")
    for_job: uuid.UUID | None = Field(None, description="The waiting job it was preempted for: null for another "
                                                         "team's job (`why` names the team) or Slurm's own")
    kind: str | None = Field(None, description="reclaim (a team took back its nominal quota), priority, or slurm")
    why: str = ""
    kept: int | None = Field(None, description="The step it saved at when it got SIGTERM (work kept)")
    resumed_at_step: int | None = Field(None, description="The step the next attempt went on from")


class TemplateRef(BaseModel):
    name: str
    version: int


class ReplicaOut(BaseModel):
    task_name: str
    pool: int
    index: int
    tf_role: str | None
    image_uri: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    status: dict[str, Any] | None = Field(
        None, description="The replica's own process where the backend records it (local, slurm): state (PENDING, "
                          "RUNNING, SUCCEEDED, FAILED, STOPPED), exit_code, signal, started_at, ended_at; null elsewhere")


def _or_none(value, handler):
    # Progress comes from replica output, which nobody vouches for: a value of the
    # wrong type is shown as null rather than failing the whole answer.
    try:
        return handler(value)
    except ValidationError:
        return None


Lenient = WrapValidator(_or_none)


class EvaluationProgress(BaseModel):
    """The evaluator's latest `evaluation` line."""

    model_config = ConfigDict(extra="allow")

    epoch: Annotated[int | None, Lenient] = None
    epochs: Annotated[int | None, Lenient] = None
    checkpoint: Annotated[str | None, Lenient] = None
    metrics: Annotated[dict[str, Annotated[float | None, Lenient]] | None, Lenient] = None
    task: Annotated[str | None, Lenient] = None
    at: Annotated[datetime | None, Lenient] = Field(None, description="When the line was written")


class JobProgress(BaseModel):
    """What the trainer's structured progress lines say (the chief's latest epoch)."""

    model_config = ConfigDict(extra="allow")

    phase: Annotated[str | None, Lenient] = Field(None, description="training or finished")
    epoch: Annotated[int | None, Lenient] = Field(None, description="The last finished epoch")
    epochs: Annotated[int | None, Lenient] = Field(None, description="Epochs in the whole run")
    steps: Annotated[int | None, Lenient] = Field(None, description="Steps in the last epoch")
    metrics: Annotated[dict[str, Annotated[float | None, Lenient]] | None, Lenient] = Field(
        None, description="The last epoch's metrics, e.g. loss and accuracy (null: not finite)")
    examples_per_sec: Annotated[float | None, Lenient] = None
    seconds: Annotated[float | None, Lenient] = Field(None, description="Duration of the last epoch")
    task: Annotated[str | None, Lenient] = Field(None, description="The reporting replica, e.g. chief:0")
    model_dir: Annotated[str | None, Lenient] = Field(None, description="Where the model was saved (at the end)")
    evaluation: Annotated[EvaluationProgress | None, Lenient] = None
    updated_at: Annotated[datetime | None, Lenient] = None


class JobSummary(BaseModel):
    id: uuid.UUID
    display_name: str
    template: TemplateRef
    backend: str
    state: JobState
    labels: dict[str, str]
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    created_by: str
    attempt: int = Field(1, description="1 for a job as launched; 2, 3... for its retries")
    retry_of: uuid.UUID | None = Field(None, description="A retry: the job's first attempt")
    relaunch_of: uuid.UUID | None = Field(None, description="Launched with POST /v1/jobs/{id}/relaunch from this job")
    preempted: bool = Field(False, description="A FAILED attempt stopped so another job could have its capacity "
                                               "(error.cause \"preemption\"): a new attempt goes on from its "
                                               "checkpoint, so it is not the job's failure")
    progress: JobProgress | None = Field(None, description="Latest training progress; null until the trainer "
                                                           "reports any")


class PlacementWishOut(BaseModel):
    """A job's placement wish, resolved at submit."""

    prefer: Literal["listed", "cheapest", "soonest"]
    start_by: datetime | None = Field(None, description="It should start by then (null: no deadline)")
    prices: dict[str, float | None] = Field(default_factory=dict, description="Its price per hour on each "
                                            "backend (null: no price there)")


class JobOut(JobSummary):
    parameters: dict[str, Any]
    overrides: Any
    backend_ref: str | None = None
    console_url: str | None = None
    error: dict[str, Any] | None = None
    not_before: datetime | None = Field(None, description="A retry waiting for its backoff is not launched "
                                                          "before this")
    retried_by: uuid.UUID | None = Field(None, description="The attempt that followed this one, if it failed "
                                                           "and was retried")
    attempts: list[AttemptRef] = Field(default_factory=list, description="Every attempt of this job, in order "
                                                                         "(this one included)")
    preemptions: list[PreemptionRef] = Field(default_factory=list, description="Every preemption over the job's "
                                             "attempts, in order: when, for which job, the step kept and resumed at")
    accepts: list[str] = Field(
        default_factory=list, description="The backends the job accepts, most preferred first, when more than one "
                                          "(its template's `backends`, docs/queue.md \"Placement across backends\"); "
                                          "`backend` is the most preferred until the controller places it, then the "
                                          "one it runs on. Empty: the job runs on `backend` alone")
    placement: str | None = Field(
        None, description="A job of several backends, once placed: where and why there, each backend's state at "
                          "that pass (\"placed on vertex: slurm: 0 of 64 vcpu free; vertex: admitted, 4 of 16 "
                          "gpu:NVIDIA_TESLA_A100 free\"); null before, and for a job of one backend")
    wish: PlacementWishOut | None = Field(
        None, description="A job of several backends: its placement wish as resolved at submit (docs/queue.md, "
                          "\"Cheapest or soonest\"); null: the listed order, no deadline")
    waiting_reason: str | None = Field(
        None, description="Why a QUEUED job has not been launched yet, in its backend's words "
                          "(e.g. waiting for the Vertex AI create budget); null once launched")
    state_observed_at: datetime | None = Field(
        None, description="When the job's backend last confirmed `state` (Vertex AI: the listing or get that showed "
                          "it). Vertex jobs are followed within a call budget, so with many active jobs the state "
                          "may be tens of seconds old: \"state as of 40 s ago\". Null: not launched yet, or a "
                          "backend that does not report it (local, Slurm: their state is read every pass)")
    custom_job: dict[str, Any] = Field(description="The Vertex AI CustomJob as the job's backend sends it "
                                                   "(with the service's defaults, e.g. baseOutputDirectory), "
                                                   "as CustomJob.to_json renders it.")
    cluster: list[ReplicaOut] = Field(description="Every replica with the exact environment its backend gives it "
                                                  "(local: 127.0.0.1 ports and run folders once launched).")
    cost: CostEstimate | None = Field(None, description="An estimate (not a bill) of what the job costs on Vertex "
                                                        "AI: per hour, to its timeout, and accrued since it started")
    queue: QueuePlace | None = Field(
        None, description="A QUEUED job not yet launched: its place in its backend's queue, why it waits and when "
                          "it may start (computed as the controller plans, cached for TRAINJOBS_QUEUE_CACHE_SECONDS); "
                          "null otherwise")
    queues: dict[str, QueuePlace] = Field(
        default_factory=dict, description="A QUEUED job of several backends (`accepts`): its place in the queue of "
                                          "each backend it accepts and this service runs, most preferred first; it "
                                          "starts on the first that admits it (`queue` is the most preferred one's). "
                                          "Empty for a job of one backend and once launched")
    resources: dict[str, Any] = Field(
        default_factory=dict, description="What else the job names (persistent_resource, tensorboard, experiment, "
                                          "experiment_run, model_upload), each with a console link or, on a backend "
                                          "where it has no meaning, a note saying so (docs/vertex.md)")


class JobPreview(BaseModel):
    """What POST /v1/jobs would launch (dry run): nothing is stored."""

    display_name: str
    template: TemplateRef
    backend: str
    labels: dict[str, str]
    custom_job: dict[str, Any]
    cluster: list[ReplicaOut]
    cost: CostEstimate | None = Field(None, description="An estimate (not a bill) of what the job would cost on "
                                                        "Vertex AI, per hour and to its timeout")
    resources: dict[str, Any] = Field(default_factory=dict, description="As in the job view")


class JobPage(BaseModel):
    items: list[JobSummary]
    next_cursor: str | None = None


class JobEventOut(BaseModel):
    id: int
    from_state: JobState | None
    to_state: JobState
    reason: str
    actor: str
    at: datetime
