"""The reference for service/jobspec/compile.py: the CustomJob built the way the service
built it before it wrote the JSON itself, through the client library's proto-plus types
(aiplatform_v1), printed with CustomJob.to_json. Tests only: it is the oracle the direct
JSON is checked against, field by field."""
from __future__ import annotations

import json

from google.cloud import aiplatform_v1 as v1
from google.protobuf import duration_pb2

from service.jobspec.spec import JobSpec, ReductionServer, Role


def custom_job(spec: JobSpec, *, display_name: str, labels: dict[str, str]) -> v1.CustomJob:
    pools = [
        _role_pool(spec, spec.chief),
        _role_pool(spec, spec.workers) if spec.workers else None,
        (_role_pool(spec, spec.parameter_servers) if spec.parameter_servers
         else _reduction_pool(spec.reduction_server) if spec.reduction_server else None),
        _role_pool(spec, spec.evaluator) if spec.evaluator else None,
    ]
    while pools and pools[-1] is None:
        pools.pop()
    job_spec = v1.CustomJobSpec(worker_pool_specs=[p or v1.WorkerPoolSpec() for p in pools],
                                scheduling=_scheduling(spec))
    if spec.base_output_directory:
        job_spec.base_output_directory = v1.GcsDestination(output_uri_prefix=spec.base_output_directory)
    if spec.service_account:
        job_spec.service_account = spec.service_account
    if spec.network:
        job_spec.network = spec.network
    if spec.enable_web_access:
        job_spec.enable_web_access = True
    if spec.persistent_resource_id:
        job_spec.persistent_resource_id = spec.persistent_resource_id
    if spec.tensorboard:
        job_spec.tensorboard = spec.tensorboard
    return v1.CustomJob(display_name=display_name, job_spec=job_spec, labels=dict(labels))


def custom_job_dict(job: v1.CustomJob) -> dict:
    return json.loads(v1.CustomJob.to_json(job, use_integers_for_enums=False,
                                           always_print_fields_with_no_presence=False, indent=None))


def job_spec_dict(job: v1.CustomJob) -> dict:
    return json.loads(v1.CustomJobSpec.to_json(job.job_spec, preserving_proto_field_name=True,
                                               use_integers_for_enums=False,
                                               always_print_fields_with_no_presence=False, indent=None))


def _role_pool(spec: JobSpec, role: Role) -> v1.WorkerPoolSpec:
    over = role.container
    image = over.image_uri if over and over.image_uri else spec.container.image_uri
    command = over.command if over and over.command is not None else spec.container.command
    args = over.args if over and over.args is not None else spec.container.args
    env = {**spec.container.env, **(over.env if over else {})}
    if role.accelerator_count:  # the GPU count the trainer checks at start (service/jobspec/cluster.py)
        env["TRAINJOBS_EXPECTED_GPUS"] = str(role.accelerator_count)
    machine = v1.MachineSpec(machine_type=role.machine_type)
    if role.accelerator_type:
        machine.accelerator_type = role.accelerator_type
        machine.accelerator_count = role.accelerator_count
    container = v1.ContainerSpec(image_uri=image, command=command, args=args,
                                 env=[v1.EnvVar(name=k, value=v) for k, v in env.items()])
    return v1.WorkerPoolSpec(machine_spec=machine, replica_count=role.replica_count, container_spec=container,
                             disk_spec=v1.DiskSpec(boot_disk_type=role.disk.boot_disk_type,
                                                   boot_disk_size_gb=role.disk.boot_disk_size_gb))


def _reduction_pool(rs: ReductionServer) -> v1.WorkerPoolSpec:
    return v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type=rs.machine_type), replica_count=rs.replica_count,
        container_spec=v1.ContainerSpec(image_uri=rs.image_uri),
        disk_spec=v1.DiskSpec(boot_disk_type=rs.disk.boot_disk_type, boot_disk_size_gb=rs.disk.boot_disk_size_gb))


def _scheduling(spec: JobSpec) -> v1.Scheduling:
    s = spec.scheduling
    out = v1.Scheduling(restart_job_on_worker_restart=s.restart_job_on_worker_restart,
                        disable_retries=s.disable_retries, strategy=s.strategy)
    if s.timeout_seconds:
        out.timeout = duration_pb2.Duration(seconds=s.timeout_seconds)
    if s.max_wait_duration_seconds:
        out.max_wait_duration = duration_pb2.Duration(seconds=s.max_wait_duration_seconds)
    return out
