"""The template spec: what a template stores and what job overrides patch.

Field names are snake_case and close to Vertex's CustomJobSpec so a reader of
Google's docs recognises them; the compiler turns this into aiplatform_v1 types."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from service.core.text import MultilineText

REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
DEFAULT_TRAINER_COMMAND = ["python", "-m", "trainer.task"]

# Google's resource name formats (the CustomJobSpec reference, docs/vertex.md). Segments are IDs:
# no slash, no whitespace. A PersistentResource ID: lowercase letters, digits and hyphens, a
# letter first, at most 63 characters. An experiment (a metadata Context) ID: lowercase letters,
# digits and hyphens, at most 128 characters.
_SEGMENT = r"[^/\s]{1,128}"
PERSISTENT_RESOURCE_ID = r"^[a-z][a-z0-9-]{0,62}$"
TENSORBOARD_NAME = rf"^projects/{_SEGMENT}/locations/{_SEGMENT}/tensorboards/{_SEGMENT}$"
EXPERIMENT_ID = r"[a-z0-9][a-z0-9-]{0,127}"
EXPERIMENT = rf"^(?:{EXPERIMENT_ID}|projects/{_SEGMENT}/locations/{_SEGMENT}/metadataStores/{_SEGMENT}/contexts/{EXPERIMENT_ID})$"

ShortStr = Annotated[str, StringConstraints(max_length=4096)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]


class Strict(BaseModel):
    # Nested in the request bodies (service.core.schema_base.RequestBody checks their text once).
    # No NaN or Infinity: PostgreSQL's json refuses them and no bound compares with NaN.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Disk(Strict):
    boot_disk_type: Literal["pd-ssd", "pd-standard"] = "pd-ssd"
    boot_disk_size_gb: int = Field(100, ge=10, le=65536)


class Container(Strict):
    image_uri: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    command: list[ShortStr] = Field(default_factory=list, max_length=64,
                                    description="Empty: the image's entrypoint (the trainer image runs "
                                                "`python -m trainer.task`).")
    args: list[ShortStr] = Field(default_factory=list, max_length=256)
    env: dict[EnvName, ShortStr] = Field(default_factory=dict, max_length=128)


class ContainerOverride(Strict):
    """Per-role changes to the template's container; env is merged, the rest replaces."""

    image_uri: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = None
    command: list[ShortStr] | None = Field(None, max_length=64)
    args: list[ShortStr] | None = Field(None, max_length=256)
    env: dict[EnvName, ShortStr] = Field(default_factory=dict, max_length=128)


class Machine(Strict):
    machine_type: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "n1-standard-4"
    accelerator_type: Annotated[str, StringConstraints(max_length=64)] | None = None
    accelerator_count: int = Field(0, ge=0, le=16)


class Role(Machine):
    replica_count: int = Field(1, ge=1, le=1000)
    disk: Disk = Field(default_factory=Disk)
    container: ContainerOverride | None = None


class ReductionServer(Strict):
    machine_type: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "n1-highcpu-16"
    replica_count: int = Field(1, ge=1, le=1000)
    image_uri: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = REDUCTION_SERVER_IMAGE
    disk: Disk = Field(default_factory=Disk)
    client_installed: bool = Field(
        False, description="The chief and worker images include Google's reduction client (the "
                           "google-reduction-server package; Google's prebuilt TensorFlow GPU training containers "
                           "have it, the packaged trainer image does not). Required: without it the reducers idle.")


class Scheduling(Strict):
    timeout_seconds: int | None = Field(None, ge=1, le=7 * 24 * 3600,
                                        description="Vertex's default is 7 days.")
    restart_job_on_worker_restart: bool = False
    # Every value of Scheduling.Strategy in the locked client (google-cloud-aiplatform 2.7.0)
    # but STRATEGY_UNSPECIFIED (Vertex reads it as STANDARD; we always send one). docs/vertex.md.
    strategy: Literal["STANDARD", "SPOT", "FLEX_START", "ON_DEMAND", "LOW_COST"] = Field(
        "STANDARD", description="STANDARD: on-demand VMs. SPOT: Spot VMs (cheaper, may be preempted). "
                                "FLEX_START: queued for capacity by Dynamic Workload Scheduler (up to "
                                "max_wait_duration_seconds). ON_DEMAND and LOW_COST: deprecated by Google "
                                "(ON_DEMAND is STANDARD's old name; LOW_COST may use Spot VMs).")
    disable_retries: bool = False
    max_wait_duration_seconds: int | None = Field(None, ge=1, le=7 * 24 * 3600)
    stall_timeout_seconds: int | None = Field(
        None, ge=1, le=7 * 24 * 3600,
        description="trainjobs, not Vertex: a training replica (chief or worker) that writes no output and "
                    "reports no progress for this long fails the job, naming the replica. Off by default.")


# google.rpc.Code values Vertex AI reports for failures of its own infrastructure
# (shared/VERTEX.md: `error.code` of a FAILED CustomJob): worth another attempt.
INFRASTRUCTURE_CODES = {"INTERNAL": 13, "UNAVAILABLE": 14, "RESOURCE_EXHAUSTED": 8}


class Backoff(Strict):
    initial_seconds: float = Field(10.0, ge=0, description="Wait before the second attempt")
    multiplier: float = Field(2.0, ge=1, le=10, description="Each later wait is the previous one times this")
    max_seconds: float = Field(600.0, ge=0, description="No wait is longer than this "
                                                        "(the service caps it at TRAINJOBS_RETRY_MAX_BACKOFF_SECONDS)")


class RetryPolicy(Strict):
    """trainjobs, not Vertex: a failed job is launched again as a new attempt (a job of its own,
    sharing the first attempt's checkpoint directory, so the trainer resumes where it stopped)."""

    max_attempts: int = Field(1, ge=1, description="Attempts in all, the first included (1: no retry; "
                                                   "the service caps it at TRAINJOBS_RETRY_MAX_ATTEMPTS)")
    on_signal: bool = Field(True, description="Retry when a replica was preempted or killed by a signal")
    on_infrastructure_error: bool = Field(
        True, description="Retry when Vertex AI reports INTERNAL, UNAVAILABLE or RESOURCE_EXHAUSTED")
    exit_codes: list[Annotated[int, Field(ge=1, le=255)]] = Field(
        default_factory=list, max_length=64, description="Replica exit codes worth another attempt")
    fatal_exit_codes: list[Annotated[int, Field(ge=1, le=255)]] = Field(
        default_factory=list, max_length=64,
        description="Exit codes never retried, whatever else says so (a signal N counts as exit code 128+N)")
    backoff: Backoff = Field(default_factory=Backoff)

    @model_validator(mode="after")
    def _disjoint(self) -> RetryPolicy:
        both = sorted(set(self.exit_codes) & set(self.fatal_exit_codes))
        if both:
            raise ValueError(f"exit codes {both} are both retried and fatal; list each in one of "
                             "exit_codes and fatal_exit_codes")
        if self.backoff.max_seconds < self.backoff.initial_seconds:
            raise ValueError("backoff.max_seconds is below backoff.initial_seconds; raise it or lower the other")
        return self


class JobSpec(Strict):
    distribution: Literal["multi_worker_mirrored", "parameter_server"] = Field(
        "multi_worker_mirrored",
        description="multi_worker_mirrored: chief + workers (+ Reduction Server); "
                    "parameter_server: chief + workers + parameter servers.")
    container: Container
    chief: Role = Field(default_factory=Role)
    workers: Role | None = None
    parameter_servers: Role | None = None
    evaluator: Role | None = None
    reduction_server: ReductionServer | None = None
    base_output_directory: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        None, description="e.g. gs://bucket/runs/${run}: Vertex derives AIP_MODEL_DIR, "
                          "AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR from it.")
    scheduling: Scheduling = Field(default_factory=Scheduling)
    service_account: Annotated[str, StringConstraints(max_length=256)] | None = None
    network: Annotated[str, StringConstraints(pattern=r"^projects/[0-9]+/global/networks/[^/]+$")] | None = None
    labels: dict[Annotated[str, StringConstraints(max_length=64)],
                 Annotated[str, StringConstraints(max_length=64)]] = Field(default_factory=dict, max_length=64)
    enable_web_access: bool = False
    # CustomJobSpec.persistentResourceId / tensorboard / experiment / experimentRun (docs/vertex.md).
    persistent_resource_id: Annotated[str, StringConstraints(pattern=PERSISTENT_RESOURCE_ID)] | None = Field(
        None, description="Run on the machines a PersistentResource keeps warm (its ID, in the job's project "
                           "and region): no wait for fresh VMs. Vertex AI only.")
    tensorboard: Annotated[str, StringConstraints(pattern=TENSORBOARD_NAME)] | None = Field(
        None, description="projects/P/locations/L/tensorboards/ID: a Vertex AI TensorBoard instance in the job's "
                          "region; Vertex uploads what the trainer writes under AIP_TENSORBOARD_LOG_DIR.")
    experiment: Annotated[str, StringConstraints(pattern=EXPERIMENT)] | None = Field(
        None, description="A Vertex AI Experiment: its name (in the job's project and region, default metadata "
                          "store) or projects/P/locations/L/metadataStores/S/contexts/NAME. Vertex AI only.")
    experiment_run: Annotated[str, StringConstraints(max_length=128)] | None = Field(
        None, description="The experiment run's name; {job_id} is replaced by the job's id and ${param} by a "
                          "parameter's value (a sweep's trials become runs of one experiment). Needs experiment.")
    model_upload: ModelUpload | None = Field(
        None, description="Upload the saved model to the Model Registry once the job SUCCEEDED. Vertex AI only.")
    retry: RetryPolicy | None = Field(None, description="Launch a failed job again (a new attempt); "
                                                        "none: a failure is final")
    priority_class: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")] | None = Field(
        None, description="trainjobs, not Vertex: the priority class (GET /v1/priority-classes) the job waits and "
                          "runs at when teams share a backend's capacity (docs/queue.md). A template's is its jobs' "
                          "default; a member picks another only if `overridable` lists priority_class and their "
                          "team may use it. None: priority 0, never preempts.")
    backends: list[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]] | None = Field(
        None, min_length=1, max_length=8,
        description="trainjobs, not Vertex: the backends a job of this template may run on, most preferred first "
                    "(docs/queue.md, \"Placement across backends\"). The job waits in each one's queue and starts on "
                    "exactly one: the most preferred that admits it in a pass, else the first that frees. None: the "
                    "one backend the request names (or the service's default), as before. A member narrows the "
                    "list with the job's `backend` or, if `overridable` lists backends, with `overrides`.")
    placement: PlacementWish | None = Field(
        None, description="trainjobs, not Vertex: how a job of several `backends` would rather be placed "
                          "(docs/queue.md, \"Cheapest or soonest\"). None: the listed order, no deadline.")
    overridable: list[Annotated[str, StringConstraints(max_length=256)]] = Field(
        default_factory=list, max_length=100,
        description="Field paths a member's job may change with `overrides`, e.g. workers.replica_count, "
                    "scheduling.timeout_seconds, container.env.BATCH_SIZE. A path covers what lies beneath it, "
                    "except container, image, command, args, env, service_account, network, "
                    "base_output_directory, enable_web_access and model_upload.serving_container_image_uri, "
                    "which must be named themselves. "
                    "Admins may override anything; parameters are always open to members.")

    @field_validator("backends")
    @classmethod
    def _once_each(cls, names: list[str] | None) -> list[str] | None:
        twice = sorted({n for n in names or () if (names or []).count(n) > 1})
        if twice:
            raise ValueError(f"backends names {', '.join(twice)} more than once; name each backend once")
        return names


class PlacementWish(Strict):
    """trainjobs, not Vertex: which of its backends a job of several would rather start on."""

    prefer: Literal["listed", "cheapest", "soonest"] = Field(
        "listed", description="listed: the order of `backends`; cheapest: the lowest price per hour for what the "
                              "job asks (the operator's TRAINJOBS_PLACEMENT_PRICES, Vertex AI's list prices); "
                              "soonest: the earliest estimated start. Ties keep the listed order")
    start_by: Annotated[int, Field(ge=1)] | AwareDatetime | None = Field(
        None, description="The job should start by then: an RFC 3339 time with its offset, or seconds from the "
                          "submit. A backend whose estimate misses it comes after those that meet it")

    @field_validator("start_by", mode="before")
    @classmethod
    def _seconds_are_seconds(cls, value):
        # A number is seconds from the submit: without this, one below 1 (or with a fraction) failed
        # the int branch and pydantic read it as a Unix time instead (-5 became 1969, silently).
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if value < 1 or value != int(value):
                raise ValueError(f"{value} is not a whole number of seconds from the submit, 1 or more; "
                                 "give seconds, or an RFC 3339 time with its offset")
            return int(value)
        return value


class ModelUpload(Strict):
    """trainjobs, not the CustomJob: after the job SUCCEEDED, the vertex backend uploads the
    model the trainer saved (AIP_MODEL_DIR: <base output directory>/model/) to the Vertex AI
    Model Registry once (models.upload). A failed upload leaves the job SUCCEEDED."""

    display_name: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        None, description="The Model's display name (Model.displayName, at most 128 characters); "
                          "none: the job's display name")
    serving_container_image_uri: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = Field(
        description="The image that serves predictions (Model.containerSpec.imageUri), e.g. one of "
                    "Google's prebuilt TensorFlow prediction images")
    labels: dict[Annotated[str, StringConstraints(max_length=64)],
                 Annotated[str, StringConstraints(max_length=64)]] = Field(default_factory=dict, max_length=60)


class Parameter(Strict):
    name: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]{0,62}$")]
    type: Literal["int", "float", "string", "bool"]
    default: int | float | str | bool | None = Field(
        None, description="No default: every job must give a value.")
    minimum: float | None = None
    maximum: float | None = None
    choices: list[int | float | str] | None = Field(None, max_length=100)
    description: Annotated[str, StringConstraints(max_length=1024), MultilineText] = ""
