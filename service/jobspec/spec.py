"""The template spec: what a template stores and what job overrides patch.

Field names are snake_case and close to Vertex's CustomJobSpec so a reader of
Google's docs recognises them; the compiler turns this into aiplatform_v1 types."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
DEFAULT_TRAINER_COMMAND = ["python", "-m", "trainer.task"]

ShortStr = Annotated[str, StringConstraints(max_length=4096)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]


class Strict(BaseModel):
    # Nested in the request bodies (service.schema_base.RequestBody checks their text once).
    # No NaN or Infinity: PostgreSQL's json refuses them and no bound compares with NaN.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Disk(Strict):
    boot_disk_type: Literal["pd-ssd", "pd-standard"] = "pd-ssd"
    boot_disk_size_gb: int = Field(100, ge=10, le=65536)


class Container(Strict):
    image_uri: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    command: list[ShortStr] = Field(default_factory=list, max_length=64,
                                    description="Empty: the image's entrypoint (the trainer image runs `python -m trainer.task`).")
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
    strategy: Literal["STANDARD", "SPOT", "FLEX_START"] = "STANDARD"
    disable_retries: bool = False
    max_wait_duration_seconds: int | None = Field(None, ge=1, le=7 * 24 * 3600)
    stall_timeout_seconds: int | None = Field(
        None, ge=1, le=7 * 24 * 3600,
        description="trainjobs, not Vertex: a training replica (chief or worker) that writes no output and "
                    "reports no progress for this long fails the job, naming the replica. Off by default.")


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
    overridable: list[Annotated[str, StringConstraints(max_length=256)]] = Field(
        default_factory=list, max_length=100,
        description="Field paths a member's job may change with `overrides`, e.g. workers.replica_count, "
                    "scheduling.timeout_seconds, container.env.BATCH_SIZE. A path covers what lies beneath it, "
                    "except container, image, command, args, env, service_account, network, "
                    "base_output_directory and enable_web_access, which must be named themselves. "
                    "Admins may override anything; parameters are always open to members.")


class Parameter(Strict):
    name: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]{0,62}$")]
    type: Literal["int", "float", "string", "bool"]
    default: int | float | str | bool | None = Field(
        None, description="No default: every job must give a value.")
    minimum: float | None = None
    maximum: float | None = None
    choices: list[int | float | str] | None = Field(None, max_length=100)
    description: Annotated[str, StringConstraints(max_length=1024)] = ""
