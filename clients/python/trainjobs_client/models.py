"""Typed views of the API's answers. Unknown fields are ignored, so a newer
service does not break an older client."""
from __future__ import annotations

import enum
import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class JobState(str, enum.Enum):
    """Vertex AI's JobState names without the JOB_STATE_ prefix."""

    QUEUED = "QUEUED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    PAUSED = "PAUSED"
    EXPIRED = "EXPIRED"
    UPDATING = "UPDATING"
    PARTIALLY_SUCCEEDED = "PARTIALLY_SUCCEEDED"

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.EXPIRED,
                             JobState.PARTIALLY_SUCCEEDED})


class TemplateRef(Model):
    name: str
    version: int


class Evaluation(Model):
    model_config = ConfigDict(extra="allow", frozen=True)

    epoch: int | None = None
    epochs: int | None = None
    checkpoint: str | None = None
    metrics: dict[str, float | None] | None = None
    at: datetime | None = None


class Progress(Model):
    """What the trainer reported last: the chief's latest epoch and its metrics."""

    model_config = ConfigDict(extra="allow", frozen=True)

    phase: str | None = None
    epoch: int | None = None
    epochs: int | None = None
    steps: int | None = None
    metrics: dict[str, float | None] | None = None
    examples_per_sec: float | None = None
    seconds: float | None = None
    task: str | None = None
    model_dir: str | None = None
    evaluation: Evaluation | None = None
    updated_at: datetime | None = None


class Replica(Model):
    task_name: str
    pool: int
    index: int
    tf_role: str | None = None
    image_uri: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    status: dict[str, Any] | None = Field(None, description="The replica's process where the backend records it "
                                                           "(local): state, exit_code, signal, started_at, ended_at")


class AttemptRef(Model):
    id: uuid.UUID
    attempt: int
    state: JobState


class JobSummary(Model):
    id: uuid.UUID
    display_name: str
    template: TemplateRef
    backend: str
    state: JobState
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    created_by: str
    progress: Progress | None = None
    attempt: int = 1
    retry_of: uuid.UUID | None = None
    relaunch_of: uuid.UUID | None = None
    preempted: bool = False   # FAILED because another job took its capacity; a new attempt goes on

    @property
    def final(self) -> bool:
        return self.state.final


class FairShare(Model):
    """A team's fair share as the scheduler compares it now (each figure divided by its weight)."""

    rank: int                  # its place among the teams with waiting jobs (1: first)
    borrowed: float = 0.0      # the largest part of a resource used beyond its nominal quota
    held: float = 0.0          # its dominant share
    running_jobs: float = 0.0
    weight: float = 1.0
    usage: float | None = None  # its part of every team's decayed use (0 to 1), added to borrowed and held


class QueueFactors(Model):
    """A waiting job's priority in parts (like Slurm's sprio): the tier, then the parts read there.
    Another team's entries carry fair_share, priority and size only."""

    tier: str | None = None               # nominated | nominal | starving | fair
    fair_share: FairShare
    priority: int = 0
    priority_class: str | None = None
    waited_seconds: float | None = None
    size: float = 0.0                     # the largest part of an arbitrated resource it asks
    decided_by: str | None = None         # tier | fair_share | turn | priority | age | forecast


class QueuePlace(Model):
    """Where a waiting job stands in its backend's queue (Job.queue)."""

    position: int | None   # 0: starts on the planner's next pass; 1: next in line; None: not yet placed (see why)
    why: str
    ahead: int | None
    computed_at: datetime | None = None        # when the queue this place is read from was computed
    likely_start: datetime | None = None       # the queue played forward with expected run times
    estimated_start: datetime | None = None    # at the latest: every running job to its time limit
    factors: QueueFactors | None = None        # its priority in parts and what decided its place


class Job(JobSummary):
    cost: dict[str, Any] | None = Field(None, description="Cost estimate (not a bill): per_hour, for_timeout, "
                                                          "accrued, pools, currency, prices_date")
    parameters: dict[str, Any] = Field(default_factory=dict)
    overrides: Any = None
    backend_ref: str | None = None
    console_url: str | None = None
    error: dict[str, Any] | None = None
    waiting_reason: str | None = None
    accepts: list[str] = Field(default_factory=list, description="The backends the job accepts, most preferred "
                               "first, when more than one")
    placement: str | None = Field(None, description="Where a job of several backends was placed, and why there")
    wish: dict[str, Any] | None = Field(None, description="A job of several backends: its placement wish "
                                        "(prefer, start_by, prices per hour), as resolved at submit")
    queue: QueuePlace | None = None
    queues: dict[str, QueuePlace] = Field(default_factory=dict, description="A waiting job of several backends: "
                                          "its place in each accepted backend's queue, most preferred first")
    state_observed_at: datetime | None = Field(None, description="When the backend last confirmed the state "
                                               "(Vertex jobs: state as of this instant)")
    not_before: datetime | None = None
    retried_by: uuid.UUID | None = None
    attempts: list[AttemptRef] = Field(default_factory=list)
    custom_job: dict[str, Any] = Field(default_factory=dict)
    cluster: list[Replica] = Field(default_factory=list)
    resources: dict[str, Any] = Field(default_factory=dict, description="What else the job names: tensorboard, "
                                      "model_upload (the model's artifact_uri), experiment, persistent_resource")


class JobPreview(Model):
    """What a submit would launch (dry run): nothing is stored."""

    cost: dict[str, Any] | None = Field(None, description="Cost estimate (not a bill)")

    display_name: str
    template: TemplateRef
    backend: str
    labels: dict[str, str] = Field(default_factory=dict)
    custom_job: dict[str, Any]
    cluster: list[Replica]


class JobEvent(Model):
    id: int
    from_state: JobState | None = None
    to_state: JobState
    reason: str
    actor: str
    at: datetime


class LogLine(Model):
    replica: str
    stream: str
    timestamp: datetime
    message: str
    cursor: str


class LogPage(Model):
    job_id: uuid.UUID
    state: JobState
    lines: list[LogLine]
    cursor: str | None = None
    done: bool


class LogEnd(Model):
    """The last event of a followed log: the job's final state and error."""

    state: JobState
    error: dict[str, Any] | None = None
    cursor: str | None = None


class Template(Model):
    name: str
    version: int
    latest_version: int
    archived: bool
    description: str
    spec: dict[str, Any]
    parameters: list[dict[str, Any]]
    created_at: datetime
    created_by: str


class TemplateSummary(Model):
    name: str
    latest_version: int
    archived: bool
    description: str
    updated_at: datetime


class TemplateVersion(Model):
    version: int
    description: str
    created_at: datetime
    created_by: str


class TokenInfo(Model):
    """The token making the requests (GET /v1/tokens/me)."""

    id: uuid.UUID
    name: str
    role: str
    team: str
    prefix: str
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None


class TeamLimits(Model):
    """A team's limits (GET/PUT /v1/teams/{team}/limits); None: no limit."""

    team: str
    max_concurrent_jobs: int | None = None
    max_accelerators: dict[str, int] = Field(default_factory=dict)
    max_monthly_spend: Decimal | None = None
    currency: str
    on_exceed: str
    updated_at: datetime | None = None
    updated_by: str | None = None


class LimitUse(Model):
    limit: str
    use: Decimal
    max: Decimal | None = None


class TeamUsage(Model):
    """A team's use against its limits (GET /v1/teams/{team}/usage): estimates, not a bill."""

    team: str
    at: datetime
    month_start: datetime
    currency: str
    jobs: int
    launched_jobs: int
    accelerators: dict[str, int] = Field(default_factory=dict)
    spend: Decimal
    spend_unpriced_jobs: int = 0
    limits: list[LimitUse] = Field(default_factory=list)
    on_exceed: str | None = None
    note: str = ""
SWEEP_TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class SweepObjective(Model):
    metric: str
    goal: str   # maximize | minimize


class Trial(Model):
    """One trial of a sweep: WAITING until the controller starts it, then its job's state."""

    number: int
    parameters: dict[str, Any] = Field(default_factory=dict)
    state: str
    job_id: uuid.UUID | None = None
    objective_value: float | None = None
    objective_epoch: int | None = None
    last_value: float | None = None
    error: str | None = None


class SweepSummary(Model):
    id: uuid.UUID
    display_name: str
    template: TemplateRef
    backend: str
    algorithm: str
    state: str      # RUNNING, PAUSED, CANCELLING, SUCCEEDED, FAILED, CANCELLED
    state_reason: str | None = None   # why it is PAUSED (its creator's token was revoked)
    objective: SweepObjective
    max_parallel: int
    trial_count: int
    counts: dict[str, int] = Field(default_factory=dict)
    best: Trial | None = None
    created_by: str
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None = None

    @property
    def final(self) -> bool:
        return self.state in SWEEP_TERMINAL_STATES


class Sweep(SweepSummary):
    seed: int | None = None
    search: dict[str, Any] = Field(default_factory=dict)
    trials: list[Trial] = Field(default_factory=list)
class ImportWarning(Model):
    """Something an import mapped or left out, at its path in the source (e.g. trainingInput.workerType)."""

    field: str
    message: str
    fix: str | None = None


class ImportedTemplate(Model):
    """What POST /v1/templates:import produced: the spec, the warnings, and the stored template if any."""

    format: str
    description: str
    spec: dict[str, Any]
    parameters: list[dict[str, Any]]
    warnings: list[ImportWarning]
    template: Template | None = None


class TeamUse(Model):
    """A team's share of one backend and its use of it (BackendQueue.teams)."""

    team: str
    nominal: dict[str, int] = Field(default_factory=dict)
    use: dict[str, int] = Field(default_factory=dict)
    borrowed: dict[str, int] = Field(default_factory=dict)
    weight: float = 1.0
    has_share: bool = False
    running_jobs: int = 0
    waiting_jobs: int = 0


class QueueEntry(Model):
    """A waiting job; another team's carry only team, position, priority and demand."""

    position: int
    team: str
    priority: int = 0
    demand: dict[str, int] = Field(default_factory=dict)
    id: uuid.UUID | None = None
    display_name: str | None = None
    why: str | None = None
    ahead: int | None = None
    likely_start: datetime | None = None       # the queue played forward with expected run times
    estimated_start: datetime | None = None    # at the latest: every running job to its time limit
    factors: QueueFactors | None = None        # its priority in parts (another team's: fair_share, priority, size)


class BackendQueue(Model):
    """One backend's queue (GET /v1/queue): capacity, use per team, the waiting jobs in order."""

    backend: str
    computed_at: datetime
    capacity: dict[str, int] = Field(default_factory=dict)
    capacity_source: str = "none"
    in_use: dict[str, int] = Field(default_factory=dict)
    free: dict[str, int] = Field(default_factory=dict)
    teams: list[TeamUse] = Field(default_factory=list)
    running_jobs: int = 0
    waiting_jobs: int = 0
    starting_jobs: int = 0
    waiting_truncated: bool = False
    waiting: list[QueueEntry] = Field(default_factory=list)
    next_offset: int | None = None
