"""Spec -> Vertex AI CustomJob plus the cluster layout. Pure: no I/O, no clock.

Pool positions are fixed by Vertex: [0] chief, [1] workers, [2] parameter
servers or Reduction Server, [3] evaluator. A skipped middle pool is an empty
WorkerPoolSpec; trailing empty pools are dropped."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Mapping

from google.cloud import aiplatform_v1 as v1
from google.protobuf import duration_pb2

from service.jobspec import cluster
from service.jobspec.spec import JobSpec, ReductionServer, Role

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
    def from_dict(cls, d: dict) -> "Replica":
        return cls(d["pool"], d["index"], d["task_name"], d["tf_role"], d["image_uri"],
                   tuple(d["command"]), tuple(d["args"]), MappingProxyType(dict(d["container_env"])))


@dataclass(frozen=True)
class CompiledJob:
    """What both backends launch. The CustomJob is kept as JSON so nobody can
    mutate the shared object; `custom_job()` hands out a fresh proto."""

    custom_job_json: str
    replicas: tuple[Replica, ...]
    # TF_CONFIG["job"] form of the spec, rendered once at compile time: rebuilding it
    # means a protobuf round trip, which every env rendering would otherwise pay.
    job_spec_json: str | None = None
    # trainjobs' own scheduling, not part of the CustomJob (see Scheduling.stall_timeout_seconds).
    stall_timeout_seconds: int | None = None

    def custom_job(self) -> v1.CustomJob:
        return v1.CustomJob.from_json(self.custom_job_json)

    @cached_property
    def custom_job_dict(self) -> dict:
        return json.loads(self.custom_job_json)

    @cached_property
    def job_spec_dict(self) -> dict:
        if self.job_spec_json is not None:
            return json.loads(self.job_spec_json)
        return json.loads(_job_spec_json(self.custom_job().job_spec))

    @property
    def base_output_directory(self) -> str | None:
        return (self.custom_job_dict.get("jobSpec", {}).get("baseOutputDirectory") or {}).get("outputUriPrefix")

    def env(self, replica: Replica, addresses: Mapping[str, str] | None = None,
            base_output_directory: str | None = None) -> dict[str, str]:
        """The exact environment Vertex gives this replica. Backends that run the
        cluster elsewhere pass their own addresses and output directory."""
        return cluster.replica_env(self, replica, addresses,
                                   base_output_directory or self.base_output_directory)

    def to_json(self) -> dict:
        out = {"custom_job": self.custom_job_dict, "replicas": [r.as_dict() for r in self.replicas],
               "job_spec": self.job_spec_dict}
        if self.stall_timeout_seconds:
            out["stall_timeout_seconds"] = self.stall_timeout_seconds
        return out

    @classmethod
    def from_json(cls, data: dict) -> "CompiledJob":
        spec = data.get("job_spec")
        return cls(json.dumps(data["custom_job"], separators=(",", ":")),
                   tuple(Replica.from_dict(r) for r in data["replicas"]),
                   json.dumps(spec, separators=(",", ":")) if spec is not None else None,
                   data.get("stall_timeout_seconds"))


def compile_spec(spec: JobSpec, *, display_name: str, labels: Mapping[str, str]) -> CompiledJob:
    pools: list[tuple[v1.WorkerPoolSpec, list[Replica]]] = [
        _role_pool(0, spec, spec.chief),
        _role_pool(1, spec, spec.workers) if spec.workers else _empty(),
        (_role_pool(2, spec, spec.parameter_servers) if spec.parameter_servers
         else _reduction_pool(spec.reduction_server) if spec.reduction_server else _empty()),
        _role_pool(3, spec, spec.evaluator) if spec.evaluator else _empty(),
    ]
    while pools and not pools[-1][1]:
        pools.pop()

    job_spec = v1.CustomJobSpec(worker_pool_specs=[p for p, _ in pools], scheduling=_scheduling(spec))
    if spec.base_output_directory:
        job_spec.base_output_directory = v1.GcsDestination(output_uri_prefix=spec.base_output_directory)
    if spec.service_account:
        job_spec.service_account = spec.service_account
    if spec.network:
        job_spec.network = spec.network
    if spec.enable_web_access:
        job_spec.enable_web_access = True

    job = v1.CustomJob(display_name=display_name, job_spec=job_spec, labels=dict(labels))
    as_json = v1.CustomJob.to_json(job, use_integers_for_enums=False,
                                   always_print_fields_with_no_presence=False, indent=None)
    return CompiledJob(as_json, tuple(r for _, rs in pools for r in rs), _job_spec_json(job.job_spec),
                       spec.scheduling.stall_timeout_seconds)


def _job_spec_json(spec: v1.CustomJobSpec) -> str:
    # TF_CONFIG["job"] carries the CustomJobSpec as a Python dict (proto field names).
    return v1.CustomJobSpec.to_json(spec, preserving_proto_field_name=True, use_integers_for_enums=False,
                                    always_print_fields_with_no_presence=False, indent=None)


def _empty() -> tuple[v1.WorkerPoolSpec, list[Replica]]:
    return v1.WorkerPoolSpec(), []


def _role_pool(pool: int, spec: JobSpec, role: Role) -> tuple[v1.WorkerPoolSpec, list[Replica]]:
    over = role.container
    image = (over.image_uri if over and over.image_uri else spec.container.image_uri)
    command = over.command if over and over.command is not None else spec.container.command
    args = over.args if over and over.args is not None else spec.container.args
    env = {**spec.container.env, **(over.env if over else {})}
    if role.accelerator_count:
        env[cluster.EXPECTED_GPUS_ENV] = str(role.accelerator_count)

    machine = v1.MachineSpec(machine_type=role.machine_type)
    if role.accelerator_type:
        machine.accelerator_type = role.accelerator_type
        machine.accelerator_count = role.accelerator_count
    container = v1.ContainerSpec(image_uri=image, command=command, args=args,
                                 env=[v1.EnvVar(name=k, value=v) for k, v in env.items()])
    pool_spec = v1.WorkerPoolSpec(
        machine_spec=machine, replica_count=role.replica_count, container_spec=container,
        disk_spec=v1.DiskSpec(boot_disk_type=role.disk.boot_disk_type,
                              boot_disk_size_gb=role.disk.boot_disk_size_gb))
    replicas = [Replica(pool, i, f"workerpool{pool}-{i}", POOL_ROLES[pool], image,
                        tuple(command), tuple(args), MappingProxyType(dict(env)))
                for i in range(role.replica_count)]
    return pool_spec, replicas


def _reduction_pool(rs: ReductionServer) -> tuple[v1.WorkerPoolSpec, list[Replica]]:
    pool_spec = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type=rs.machine_type), replica_count=rs.replica_count,
        container_spec=v1.ContainerSpec(image_uri=rs.image_uri),
        disk_spec=v1.DiskSpec(boot_disk_type=rs.disk.boot_disk_type, boot_disk_size_gb=rs.disk.boot_disk_size_gb))
    return pool_spec, [Replica(2, i, f"workerpool2-{i}", None, rs.image_uri, (), ())
                       for i in range(rs.replica_count)]


def _scheduling(spec: JobSpec) -> v1.Scheduling:
    s = spec.scheduling
    out = v1.Scheduling(restart_job_on_worker_restart=s.restart_job_on_worker_restart,
                        disable_retries=s.disable_retries, strategy=s.strategy)
    if s.timeout_seconds:
        out.timeout = duration_pb2.Duration(seconds=s.timeout_seconds)
    if s.max_wait_duration_seconds:
        out.max_wait_duration = duration_pb2.Duration(seconds=s.max_wait_duration_seconds)
    return out
