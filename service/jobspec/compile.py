"""Spec -> Vertex AI CustomJob plus the cluster layout. Pure: no I/O, no clock.

Pool positions are fixed by Vertex: [0] chief, [1] workers, [2] parameter
servers or Reduction Server, [3] evaluator. A skipped middle pool is an empty
WorkerPoolSpec; trailing empty pools are dropped.

The CustomJob is written directly as the JSON that `aiplatform_v1.CustomJob.to_json`
prints (proto3 JSON: camelCase names, int64 as strings, enums by name, zero values
left out), without building proto-plus messages: those cost more than the rest of a
submit together. tests/jobspec/test_compile_json.py checks, for many generated specs,
that this JSON is what the client types print and that it round-trips through them
unchanged. The client library is imported only when a proto is asked for."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from service.jobspec import cluster
from service.jobspec.spec import JobSpec, ReductionServer, Role

if TYPE_CHECKING:
    from google.cloud.aiplatform_v1 import CustomJob

POOL_ROLES = {0: "chief", 1: "worker", 2: "ps", 3: "evaluator"}


@dataclass(frozen=True)
class Replica:
    pool: int
    index: int
    task_name: str             # Vertex's name for it: workerpool1-0
    tf_role: str | None        # chief | worker | ps | evaluator; None: Reduction Server
    image_uri: str
    command: tuple[str, ...]   # empty: the image's entrypoint
    args: tuple[str, ...]
    container_env: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"pool": self.pool, "index": self.index, "task_name": self.task_name,
                "tf_role": self.tf_role, "image_uri": self.image_uri,
                "command": list(self.command), "args": list(self.args),
                "container_env": dict(self.container_env)}

    @classmethod
    def from_dict(cls, d: dict) -> Replica:
        return cls(d["pool"], d["index"], d["task_name"], d["tf_role"], d["image_uri"],
                   tuple(d["command"]), tuple(d["args"]), MappingProxyType(dict(d["container_env"])))


@dataclass(frozen=True)
class CompiledJob:
    """What every backend launches. The CustomJob is kept as JSON so nobody can
    mutate the shared object; `custom_job()` hands out a fresh proto."""

    custom_job_json: str
    replicas: tuple[Replica, ...]
    # TF_CONFIG["job"] form of the spec, rendered once at compile time: rebuilding it
    # means a protobuf round trip, which every env rendering would otherwise pay.
    job_spec_json: str | None = None
    # trainjobs' own scheduling, not part of the CustomJob (see Scheduling.stall_timeout_seconds).
    stall_timeout_seconds: int | None = None
    # trainjobs' retry policy (RetryPolicy as a dict; None: a failure is final), read by the lifecycle.
    retry: Mapping[str, Any] | None = None
    # A retry attempt: the id of the job (its first attempt) whose output directory it uses,
    # so it finds that job's checkpoints and resumes. None: its own.
    output_of: str | None = None
    # What the vertex backend adds once it knows the job's id, project and region: the
    # experiment and run-name pattern (CustomJobSpec.experiment / experimentRun) and the model
    # upload after success (spec.ModelUpload). None: none of them.
    vertex: Mapping[str, Any] | None = None
    # trainjobs' priority class (service/capacity), resolved to a priority at submit.
    priority_class: str | None = None
    # The backends the job may run on, most preferred first (JobSpec.backends); None: the one
    # the request names (or the service's default).
    backends: tuple[str, ...] | None = None
    # The job's placement wish (JobSpec.placement, as JSON; None: the listed order), resolved at submit.
    placement: Mapping[str, Any] | None = None

    def custom_job(self) -> CustomJob:
        from google.cloud.aiplatform_v1 import CustomJob
        return CustomJob.from_json(self.custom_job_json)

    @cached_property
    def custom_job_dict(self) -> dict:
        return json.loads(self.custom_job_json)

    @cached_property
    def job_spec_dict(self) -> dict:
        if self.job_spec_json is not None:
            return json.loads(self.job_spec_json)
        # A row stored before job_spec_json existed.
        from google.cloud.aiplatform_v1 import CustomJobSpec
        return json.loads(CustomJobSpec.to_json(self.custom_job().job_spec, preserving_proto_field_name=True,
                                                use_integers_for_enums=False,
                                                always_print_fields_with_no_presence=False, indent=None))

    @property
    def base_output_directory(self) -> str | None:
        return (self.custom_job_dict.get("jobSpec", {}).get("baseOutputDirectory") or {}).get("outputUriPrefix")

    def env(self, replica: Replica, addresses: Mapping[str, str] | None = None,
            base_output_directory: str | None = None, *, trial_in_task: bool = True) -> dict[str, str]:
        """The exact environment Vertex gives this replica. Backends that run the
        cluster elsewhere pass their own addresses and output directory."""
        return cluster.replica_env(self, replica, addresses,
                                   base_output_directory or self.base_output_directory, trial_in_task)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"custom_job": self.custom_job_dict, "replicas": [r.as_dict() for r in self.replicas],
               "job_spec": self.job_spec_dict}
        if self.stall_timeout_seconds:
            out["stall_timeout_seconds"] = self.stall_timeout_seconds
        out.update(self._trainjobs_fields())
        return out

    def _trainjobs_fields(self) -> dict:
        out: dict[str, Any] = {}
        if self.retry is not None:
            out["retry"] = dict(self.retry)
        if self.output_of is not None:
            out["output_of"] = self.output_of
        if self.vertex:
            out["vertex"] = dict(self.vertex)
        if self.priority_class is not None:
            out["priority_class"] = self.priority_class
        if self.backends is not None:
            out["backends"] = list(self.backends)
        if self.placement is not None:
            out["placement"] = dict(self.placement)
        return out

    def to_json_text(self) -> str:
        """`json.dumps(self.to_json())`, assembled from the JSON already written at compile time."""
        job_spec = self.job_spec_json if self.job_spec_json is not None else dumps(self.job_spec_dict)
        out = (f'{{"custom_job":{self.custom_job_json},"replicas":{dumps([r.as_dict() for r in self.replicas])},'
               f'"job_spec":{job_spec}')
        if self.stall_timeout_seconds:
            out += f',"stall_timeout_seconds":{int(self.stall_timeout_seconds)}'
        for key, value in self._trainjobs_fields().items():
            out += f',"{key}":{dumps(value)}'
        return out + "}"

    @classmethod
    def from_json(cls, data: dict) -> CompiledJob:
        spec = data.get("job_spec")
        return cls(json.dumps(data["custom_job"], separators=(",", ":")),
                   tuple(Replica.from_dict(r) for r in data["replicas"]),
                   json.dumps(spec, separators=(",", ":")) if spec is not None else None,
                   data.get("stall_timeout_seconds"), data.get("retry"), data.get("output_of"),
                   data.get("vertex"), data.get("priority_class"),
                   tuple(data["backends"]) if data.get("backends") is not None else None, data.get("placement"))


def compile_spec(spec: JobSpec, *, display_name: str, labels: Mapping[str, str],
                 service_env: Mapping[str, str] | None = None) -> CompiledJob:
    """`service_env`: variables trainjobs itself gives every TensorFlow replica (a sweep's
    trial id), after the template's (which may not use these names: env_policy)."""
    extra = dict(service_env or {})
    pools: list[tuple[dict, list[Replica]]] = [
        _role_pool(0, spec, spec.chief, extra),
        _role_pool(1, spec, spec.workers, extra) if spec.workers else _empty(),
        (_role_pool(2, spec, spec.parameter_servers, extra) if spec.parameter_servers
         else _reduction_pool(spec.reduction_server) if spec.reduction_server else _empty()),
        _role_pool(3, spec, spec.evaluator, extra) if spec.evaluator else _empty(),
    ]
    while pools and not pools[-1][1]:
        pools.pop()

    # CustomJobSpec with proto field names, in field-number order (as the client prints it).
    job_spec: dict[str, Any] = {}
    if spec.persistent_resource_id:
        job_spec["persistent_resource_id"] = spec.persistent_resource_id
    job_spec.update({"worker_pool_specs": [p for p, _ in pools], "scheduling": _scheduling(spec)})
    if spec.service_account:
        job_spec["service_account"] = spec.service_account
    if spec.network:
        job_spec["network"] = spec.network
    if spec.base_output_directory:
        job_spec["base_output_directory"] = {"output_uri_prefix": spec.base_output_directory}
    if spec.tensorboard:
        job_spec["tensorboard"] = spec.tensorboard
    if spec.enable_web_access:
        job_spec["enable_web_access"] = True

    custom_job = {"displayName": display_name, "jobSpec": _camel(job_spec)}
    if labels:
        custom_job["labels"] = dict(labels)
    compiled = CompiledJob(dumps(custom_job), tuple(r for _, rs in pools for r in rs), dumps(job_spec),
                           spec.scheduling.stall_timeout_seconds,
                           spec.retry.model_dump(mode="json") if spec.retry is not None else None,
                           vertex=_vertex_extras(spec), priority_class=spec.priority_class,
                           backends=tuple(spec.backends) if spec.backends is not None else None,
                           placement=spec.placement.model_dump(mode="json") if spec.placement is not None else None)
    # Already in hand: spare the first readers a json.loads (cached_property's own slot).
    compiled.__dict__["custom_job_dict"] = custom_job
    compiled.__dict__["job_spec_dict"] = job_spec
    return compiled


def dumps(obj: Any) -> str:
    """JSON as the CustomJob and the stored compiled job are written (jobs.compile_reuse writes
    a job's outer keys with it too: the same bytes)."""
    return json.dumps(obj, separators=(",", ":"))


# proto field name -> JSON name, for every field compile_spec writes inside the CustomJobSpec.
_JSON_NAMES = {
    "worker_pool_specs": "workerPoolSpecs", "scheduling": "scheduling", "service_account": "serviceAccount",
    "network": "network", "base_output_directory": "baseOutputDirectory", "enable_web_access": "enableWebAccess",
    "output_uri_prefix": "outputUriPrefix", "machine_spec": "machineSpec", "replica_count": "replicaCount",
    "disk_spec": "diskSpec", "container_spec": "containerSpec", "machine_type": "machineType",
    "accelerator_type": "acceleratorType", "accelerator_count": "acceleratorCount",
    "boot_disk_type": "bootDiskType", "boot_disk_size_gb": "bootDiskSizeGb", "image_uri": "imageUri",
    "command": "command", "args": "args", "env": "env", "name": "name", "value": "value",
    "timeout": "timeout", "restart_job_on_worker_restart": "restartJobOnWorkerRestart", "strategy": "strategy",
    "disable_retries": "disableRetries", "max_wait_duration": "maxWaitDuration",
    "persistent_resource_id": "persistentResourceId", "tensorboard": "tensorboard",
}


def _vertex_extras(spec: JobSpec) -> dict | None:
    out: dict[str, Any] = {}
    if spec.experiment:
        out["experiment"] = spec.experiment
    if spec.experiment_run:
        out["experiment_run"] = spec.experiment_run
    if spec.model_upload is not None:
        out["model_upload"] = spec.model_upload.model_dump(mode="json", exclude_none=True)
    return out or None


def _camel(value: Any) -> Any:
    """A copy with JSON names. Every key inside a CustomJobSpec is a field name (no maps there).
    Exact types, not isinstance: compile_spec builds plain dicts and lists, and this runs ~50
    times a submit (bench/profile_submit.py: isinstance was the most called function); a list
    of strings (command, args) is copied without a call per item."""
    kind = type(value)
    if kind is dict:
        return {_JSON_NAMES[k]: _camel(v) for k, v in value.items()}
    if kind is list:
        if all(type(v) is str for v in value):
            return list(value)
        return [_camel(v) for v in value]
    return value


def _empty() -> tuple[dict, list[Replica]]:
    return {}, []


def _disk(disk) -> dict:
    return {"boot_disk_type": disk.boot_disk_type, "boot_disk_size_gb": disk.boot_disk_size_gb}


def _container(image: str, command: list[str], args: list[str], env: Mapping[str, str]) -> dict:
    # proto3 leaves out empty lists and empty strings (an EnvVar's empty value included).
    out: dict[str, Any] = {"image_uri": image}
    if command:
        out["command"] = list(command)
    if args:
        out["args"] = list(args)
    if env:
        out["env"] = [{"name": k, "value": v} if v else {"name": k} for k, v in env.items()]
    return out


def _role_pool(pool: int, spec: JobSpec, role: Role, service_env: Mapping[str, str]) -> tuple[dict, list[Replica]]:
    over = role.container
    image = (over.image_uri if over and over.image_uri else spec.container.image_uri)
    command = over.command if over and over.command is not None else spec.container.command
    args = over.args if over and over.args is not None else spec.container.args
    env = {**spec.container.env, **(over.env if over else {}), **service_env}
    if role.accelerator_count:
        env[cluster.EXPECTED_GPUS_ENV] = str(role.accelerator_count)

    machine: dict[str, Any] = {"machine_type": role.machine_type}
    if role.accelerator_type:
        machine["accelerator_type"] = role.accelerator_type
        if role.accelerator_count:
            machine["accelerator_count"] = role.accelerator_count
    pool_spec = {"machine_spec": machine, "replica_count": str(role.replica_count),  # int64: a string
                 "disk_spec": _disk(role.disk), "container_spec": _container(image, command, args, env)}
    frozen_env = MappingProxyType(env)
    replicas = [Replica(pool, i, f"workerpool{pool}-{i}", POOL_ROLES[pool], image,
                        tuple(command), tuple(args), frozen_env)
                for i in range(role.replica_count)]
    return pool_spec, replicas


def _reduction_pool(rs: ReductionServer) -> tuple[dict, list[Replica]]:
    pool_spec = {"machine_spec": {"machine_type": rs.machine_type}, "replica_count": str(rs.replica_count),
                 "disk_spec": _disk(rs.disk), "container_spec": {"image_uri": rs.image_uri}}
    return pool_spec, [Replica(2, i, f"workerpool2-{i}", None, rs.image_uri, (), ())
                       for i in range(rs.replica_count)]


def _scheduling(spec: JobSpec) -> dict:
    s = spec.scheduling
    out: dict[str, Any] = {}
    if s.timeout_seconds:
        out["timeout"] = f"{s.timeout_seconds}s"  # google.protobuf.Duration
    if s.restart_job_on_worker_restart:
        out["restart_job_on_worker_restart"] = True
    out["strategy"] = s.strategy  # never STRATEGY_UNSPECIFIED (0), so always printed
    if s.disable_retries:
        out["disable_retries"] = True
    if s.max_wait_duration_seconds:
        out["max_wait_duration"] = f"{s.max_wait_duration_seconds}s"
    return out
