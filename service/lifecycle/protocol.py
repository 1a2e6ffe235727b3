"""What the lifecycle asks of a place that runs jobs, and what it hears back.

Backends never touch the database and never decide a job's state. They receive
JobHandles (a read-only view of a job row) and report facts as Observations
(what Vertex says, how a replica exited); lifecycle.engine decides what those
mean for the job and writes it. What a backend can do is declared in its
Capabilities, not probed with getattr."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from service.core.errors import Problem
from service.jobspec import CompiledJob
from service.lifecycle.states import JobState


class TransientBackendError(Exception):
    """Worth retrying later (429, 5xx, timeouts): never a reason to fail a job.

    `nothing_launched`: the backend knows the attempt launched nothing (refused before
    it was processed, e.g. a 429), so the next one need not wait for it to settle."""

    def __init__(self, message: str, *, nothing_launched: bool = False):
        super().__init__(message)
        self.nothing_launched = nothing_launched


class BudgetExhausted(TransientBackendError):
    """The backend's budget of calls is spent for now (nothing was sent): any other call in
    this pass would be refused too, so the caller stops until its next pass."""

    def __init__(self, message: str):
        super().__init__(message, nothing_launched=True)


class PermanentBackendError(Exception):
    """The backend refused the job for good; `code` and `message` are its own words."""

    def __init__(self, message: str, code: int | str | None = None, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details or {}   # the backend's own fields for the job's error (e.g. slurm_reason)


class JobHandle:
    """A read-only view of one job for a backend.

    `compiled` may be given as a zero-argument loader: the reconciler hands over
    every active job each pass, and most (queued, or merely polled) never need
    their CustomJob parsed, so it is loaded on first use only."""

    __slots__ = ("id", "state", "backend_ref", "created_at", "display_name", "launch_attempted_at",
                 "team", "priority_class", "_compiled")

    def __init__(self, id: uuid.UUID, state: JobState, backend_ref: str | None,
                 compiled: CompiledJob | Callable[[], CompiledJob], created_at: datetime,
                 display_name: str = "", launch_attempted_at: datetime | None = None,
                 team: str | None = None, priority_class: str | None = None) -> None:
        self.id = id
        self.state = state
        self.backend_ref = backend_ref   # the backend's own id: a CustomJob name, a local run folder
        self.created_at = created_at
        self.display_name = display_name
        # Stored before every submit attempt (by any controller, ever): a backend whose
        # create is not idempotent waits until an earlier attempt can no longer land.
        self.launch_attempted_at = launch_attempted_at
        # The owning team's name: a backend may run each team's jobs under an identity of its own.
        self.team = team
        # Its priority class's name (jobs.priority_class; None: none): a backend may map it to
        # its own scheduler's class (Slurm: a QoS, TRAINJOBS_SLURM_PRIORITY_QOS).
        self.priority_class = priority_class
        self._compiled = compiled

    @property
    def compiled(self) -> CompiledJob:
        if not isinstance(self._compiled, CompiledJob):
            self._compiled = self._compiled()
        return self._compiled

    def __repr__(self) -> str:
        return f"JobHandle({self.id}, {self.state.value}, {self.backend_ref!r})"


@dataclass(frozen=True)
class Observation:
    """What a backend saw of one job. None means "no news" for that field."""

    job_id: uuid.UUID
    state: JobState | None = None
    reason: str = ""
    error: dict | None = None         # {"code": ..., "message": ..., "replica": ...}
    backend_ref: str | None = None
    console_url: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    progress: dict | None = None
    # The longest a training replica (chief, worker) of a RUNNING job was observed silent:
    # {"replica": task name, "seconds": s}, counted only over time the backend actually
    # read (e.g. successful Cloud Logging reads). The controller judges it against the
    # job's stall_timeout_seconds (lifecycle/stalls.py); the backend decides nothing.
    silence: dict | None = None
    # Something the job's history should say that moves no state (e.g. "requeued by Slurm
    # (preempted)": the backend's scheduler put a RUNNING job back in its queue under the same
    # id): recorded as an event from the job's state to itself, once per report.
    note: str | None = None


@dataclass(frozen=True)
class SubmitResult:
    backend_ref: str | None = None
    state: JobState | None = None     # None: stays QUEUED until a poll says more
    console_url: str | None = None
    reason: str = ""
    # With no backend_ref: the backend made no launch attempt at all (e.g. it waits for
    # its create budget), so the one recorded before the call is forgotten. `reason` says
    # why the job waits; the job shows it while QUEUED.
    nothing_launched: bool = False


@dataclass(frozen=True)
class LaunchView:
    """What a backend gives a job: the CustomJob it sends (or would send) and the exact
    environment of each replica (task name -> env), for the job view and dry runs."""

    custom_job: dict
    env: dict[str, dict[str, str]]
    # What else the job names (a TensorBoard, an experiment, a model upload): name -> a link
    # (a console page, a local folder) or a note saying where it has no meaning.
    resources: dict[str, Any] = field(default_factory=dict)
    # Each replica's own process as the backend recorded it, where it knows (task name ->
    # state, exit_code, signal, started_at, ended_at): the CLI's `jobs get` shows it.
    replicas: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Where the trainer writes its TensorBoard logs (AIP_TENSORBOARD_LOG_DIR) as this backend
    # runs the job, and a page that browses it (None: none); the UI shows both.
    tensorboard_dir: str | None = None
    tensorboard_url: str | None = None
    # The job's output folder on the service's own host, where the backend runs it there (None:
    # elsewhere); the UI names it.
    host_output_dir: str | None = None


_GCS = "gs://"
_GCS_BROWSER = "https://console.cloud.google.com/storage/browser/"


def tensorboard_of(compiled: CompiledJob) -> tuple[str | None, str | None]:
    """LaunchView's (tensorboard_dir, tensorboard_url) for a job that writes under its base
    output directory (a gs:// one has the Cloud console's browser)."""
    base = compiled.base_output_directory
    logs = base.rstrip("/") + "/logs/" if base else None
    url = _GCS_BROWSER + quote(logs[len(_GCS):]) if logs and logs.startswith(_GCS) else None
    return logs, url


def default_launch_view(compiled: CompiledJob) -> LaunchView:
    """The job as compiled: what a backend that adds nothing shows, and the view of a job whose
    backend is not enabled here."""
    logs, url = tensorboard_of(compiled)
    return LaunchView(compiled.custom_job_dict, {r.task_name: compiled.env(r) for r in compiled.replicas},
                      tensorboard_dir=logs, tensorboard_url=url)


@dataclass(frozen=True)
class LogLine:
    cursor: str          # opaque; pass back as `since` to read what comes after
    replica: str         # task name, e.g. workerpool1-0
    stream: str          # stdout | stderr (local) or the entry's severity (Cloud Logging)
    timestamp: datetime
    message: str


@dataclass(frozen=True)
class LogPage:
    lines: list[LogLine] = field(default_factory=list)
    cursor: str | None = None   # resume point after the last line (None: nothing read yet)
    more: bool = False          # the backend knows more lines are waiting right now (a read cap stopped it)


@dataclass(frozen=True)
class Capabilities:
    """What a backend declares; the lifecycle plans around it."""

    # Its replicas are processes on the controller's host: only a controller on that
    # host may follow them, and a controller elsewhere must never call them gone.
    host_bound: bool = False
    # It lists its jobs in bulk once per pass (begin_pass), not one call per job.
    bulk_poll: bool = False
    # Jobs it may run at once (PENDING/RUNNING/...): the planner's launch slots; the rest wait in QUEUED.
    # None: no cap of ours (the backend's own quotas still apply).
    max_running: int | None = None
    # Submits the controller may make in one pass (e.g. a create quota); None: no cap.
    max_submits_per_pass: int | None = None
    # After a launch attempt whose outcome is unknown, submit() is still offered the job (to
    # look it up) but no new attempt is recorded for this long: a non-idempotent create
    # (Vertex) waits until the earlier one can no longer land. 0: every pass is a new attempt.
    resubmit_after_seconds: float = 0.0
    # The shortest interval between two reads of one job's logs by the shared log reader
    # (service/logs/fanout.py); idle streams back off to a few times this.
    log_poll_seconds: float = 0.1
    # Where it runs a job, in the cost estimate's words ("this machine"): the estimate says what
    # the job would cost on Vertex AI. None: it runs on Vertex AI, where the prices are billed.
    runs_on: str | None = None
    # It implements SharesCapacity.preempt (a graceful stop: SIGTERM, a grace, SIGKILL; or its own
    # cancel). Declared, not probed: without it the controller preempts through cancel().
    preempts: bool = False
    # Where it keeps a job's output, so its checkpoints, in words ("gs://bucket/out", a folder); None: unsaid.
    output_root: str | None = None
    # The folder the operator declared shared with other backends (TRAINJOBS_<BACKEND>_SHARED_OUTPUT_DIR), where it
    # keeps every job's output: a preempted job's next attempt may go on on any backend it accepts that declares
    # the same folder (lifecycle/continuation.py); None: none, its next attempt stays on this backend.
    shared_output: str | None = None


# --- the roles a backend plays -------------------------------------------------------------------
# Protocols, so mypy checks a backend against each: a method without a default (submit, poll,
# cancel, read_logs) is abstract, and a backend class lacking one cannot be instantiated. A
# backend subclasses `Backend` (every role below) and may play the optional ones
# (UploadsModels) and SharesCapacity (the shared-capacity scheduler's hooks: a job's demand, what
# the backend could offer, a graceful stop), so a backend without them keeps working.


class Hosted(Protocol):
    """Every process: its lifetime. The lifecycle calls start_client() in every API process and
    close() when the process stops."""

    name: str
    capabilities: Capabilities = Capabilities()

    def start_client(self) -> None:
        """Enough to check launchability and read logs. Raise on misconfiguration."""
        return None

    def close(self) -> None:
        """The process is stopping."""
        return None


class Checks(Protocol):
    """The API's questions, before a job is stored and for the job view. No call to any cloud."""

    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        """Backend-specific refusals, before the job is stored (e.g. no Reduction Server locally)."""
        return []

    def check_for_team(self, compiled: CompiledJob, team: str) -> list[Problem]:
        """Refusals that depend on the team submitting it (Slurm: an account label not the team's)."""
        return []

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        """The CustomJob and replica environments exactly as this backend launches them
        (defaults it adds, local paths and ports once known), and the facts the layers above
        show (TensorBoard folder, output folder)."""
        return default_launch_view(compiled)


class Runs(Protocol):
    """The controller's: start_controller() only in the elected controller (stop_controller()
    when it steps down), and the rest only from that controller's loop for this backend, one
    call at a time."""

    def start_controller(self) -> None:
        """This process became the controller: follow (and adopt) the backend's jobs."""
        return None

    def stop_controller(self) -> None:
        """This process is no longer the controller: stop following; leave jobs running."""
        return None

    def begin_pass(self) -> None:
        """A pass over every active job starts (bulk_poll backends list once here)."""
        return None

    def end_pass(self) -> None:
        """The pass is over (whatever begin_pass cached is stale from now on)."""
        return None

    def submit(self, job: JobHandle) -> SubmitResult:
        """Start an admitted job. May raise TransientBackendError (the job stays QUEUED and is
        offered again on a later pass) or PermanentBackendError (the job fails)."""
        ...

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        """One batch of this backend's launched, unfinished jobs, oldest first: facts only
        (states, exit codes, progress, each judged replica's silence; lifecycle/stalls.py judges)."""
        ...

    def observed(self, jobs: Sequence[JobHandle]) -> dict[uuid.UUID, tuple[JobState, datetime]]:
        """After poll(jobs): when the backend confirmed each job's state, for those it confirmed
        since it was last asked: job id -> (the job's state after this poll's observations,
        when the backend saw it). The controller stores it where the job is still in that state
        (the job view's `state_observed_at`: with a call budget, "state as of 40 s ago").
        Default: nothing reported (the field stays empty)."""
        return {}

    def cancel(self, job: JobHandle) -> JobState | None:
        """Ask the job to stop. Return CANCELLED for a job that never started, or None when a
        later poll will report the outcome."""
        ...


class ReadsLogs(Protocol):
    """Every process: a job's replicas' log lines (service/logs/)."""

    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None,
                  limit: int) -> LogPage:
        """Lines after cursor `since`, oldest first, at most `limit`."""
        ...

    def follow_interval(self, job: JobHandle, *, caught_up: bool, idle_seconds: float) -> float | None:
        """Seconds a follower of this job's logs should wait before its next read_logs (a
        backend whose log reads have a quota adapts it); None: the caller's own interval.
        `caught_up`: the last read returned less than a full page; `idle_seconds`: how long
        no new line has come."""
        return None


class Backend(Hosted, Checks, Runs, ReadsLogs, Protocol):
    """A backend: every role above. What the registry (service/backends/registry.py) builds
    and the controller, the API and the log reader are given."""


@runtime_checkable
class ModelClient(Protocol):
    """The narrow client a backend gives the model-upload domain (service/model_uploads/): the
    domain keeps the rows, the once-per-job guarantees and the events; the client only talks to
    the registry of models. Each call is one attempt: it raises BudgetExhausted (stop this
    pass), TransientBackendError (try again later) or PermanentBackendError (give up; `message`
    says why in the registry's words)."""

    def plan(self, job_id: str, compiled: CompiledJob, display_name: str) -> object | None:
        """The upload `job_id`'s model needs (opaque to the caller); None: nothing to upload
        (the job saved no model where the registry can read it)."""
        ...

    def upload(self, job_id: str, plan: object) -> str:
        """Upload it; the model's name. An upload of this job that landed earlier (the same
        model id) is that model, not a second one."""
        ...

    def find(self, job_id: str) -> str | None:
        """The model an earlier upload of this job made (found by the job-id label), if any."""
        ...

    def console_url(self, model: str) -> str | None:
        """A page showing the uploaded `model` (its name as upload/find gave it), for the job view."""
        return None


@runtime_checkable
class UploadsModels(Protocol):
    """The role of a backend that can upload a SUCCEEDED job's model (a template's
    `model_upload`); the controller runs the uploads (service/model_uploads/)."""

    name: str

    def upload_client(self) -> ModelClient:
        ...


@runtime_checkable
class SharesCapacity(Protocol):
    """The role of a backend whose capacity teams share (service/capacity, service/scheduling).

    Resources are named counts in the backend's own terms: "core" (this machine's cores), "gpu",
    "vcpu", "gpu:NVIDIA_TESLA_A100" (an accelerator type). The scheduler never interprets a name;
    a resource the backend's capacity does not name is not arbitrated."""

    name: str

    def demand(self, compiled: CompiledJob) -> dict[str, int]:
        """What the job holds while it runs, from its compiled pools (every replica of every
        pool): e.g. {"vcpu": 4 x 8, "gpu:NVIDIA_TESLA_T4": 4 x 1}. Pure: no call to anything."""
        ...

    def offered_capacity(self) -> dict[str, int]:
        """What this backend could run at once as far as it can tell by itself (this machine's
        cores and GPUs; {} where it cannot know, e.g. a Vertex project's quota). Shown to the
        operator beside the capacity they set; never applied unless they set it."""
        return {}

    def preempt(self, job: JobHandle, grace_seconds: float) -> None:
        """Stop a launched job for another one, gracefully: its replicas get SIGTERM (the trainer
        saves a checkpoint), and whatever still runs after `grace_seconds` is killed (a backend
        that cannot signal cancels, as Vertex AI does: its SIGTERM and grace are Google's). Returns
        at once; a later poll reports how the job ended. May raise TransientBackendError (asked
        again on the next pass) or PermanentBackendError."""
        ...
