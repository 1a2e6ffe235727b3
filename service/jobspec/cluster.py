"""The environment Vertex AI sets on each replica: TF_CONFIG, CLUSTER_SPEC and
the AIP_* output directories (formats in shared/VERTEX.md)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from service.jobspec.trial import TRIAL_ENV

if TYPE_CHECKING:
    from service.jobspec.compile import CompiledJob, Replica

VERTEX_PORT = 2222
# The GPUs each replica of a pool with accelerators should see (its machine's
# accelerator_count). Not a Vertex variable: compile.py puts it in the pool's
# container env, so Vertex and the local backend both pass it on, and the trainer
# (trainer/hardware.py, same name) stops at start when TensorFlow sees fewer.
EXPECTED_GPUS_ENV = "TRAINJOBS_EXPECTED_GPUS"


def default_address(task_name: str) -> str:
    # Vertex resolves each replica by a host name of its own on port 2222; the
    # exact host names are Vertex's choice, so the preview shows the task names.
    return f"{task_name}:{VERTEX_PORT}"


def replica_env(job: CompiledJob, replica: Replica, addresses: Mapping[str, str] | None,
                base_output_directory: str | None, trial_in_task: bool = True) -> dict[str, str]:
    """`trial_in_task`: put a sweep trial's id in TF_CONFIG and CLUSTER_SPEC `task` (as Vertex's
    tuning does, and the local backend); False for a Vertex CustomJob, whose TF_CONFIG Vertex
    builds without it (the trial id is then in the env alone)."""
    addr = (lambda r: addresses[r.task_name]) if addresses is not None else (lambda r: default_address(r.task_name))
    env = dict(replica.container_env)
    # The spec as JSON once (written at compile time), spliced in as the last key: it is
    # most of each variable and encoding it again per replica and variable is the cost.
    spec_json = job.job_spec_json if job.job_spec_json is not None else _dumps(job.job_spec_dict)

    pools: dict[str, list[str]] = {}
    for r in job.replicas:
        pools.setdefault(f"workerpool{r.pool}", []).append(addr(r))
    # A sweep trial's replicas carry its id (jobspec.trial); Vertex's tuning puts it in `task`.
    trial = replica.container_env.get(TRIAL_ENV) if trial_in_task else None
    with_trial = {"trial": trial} if trial else {}
    env["CLUSTER_SPEC"] = _with_job({
        "cluster": pools, "environment": "cloud",
        "task": {"type": f"workerpool{replica.pool}", "index": replica.index, **with_trial}}, spec_json)

    # TF_CONFIG only for distributed jobs, only for TensorFlow tasks; the
    # evaluator is never part of `cluster`, and Reduction Server replicas are not TF tasks.
    if len(job.replicas) > 1 and replica.tf_role is not None:
        tf_cluster: dict[str, list[str]] = {}
        for r in job.replicas:
            if r.tf_role in ("chief", "worker", "ps"):
                tf_cluster.setdefault(r.tf_role, []).append(addr(r))
        env["TF_CONFIG"] = _with_job({
            "cluster": tf_cluster, "task": {"type": replica.tf_role, "index": replica.index, **with_trial},
            "environment": "cloud"}, spec_json)

    if base_output_directory:
        base = base_output_directory.rstrip("/")
        env["AIP_MODEL_DIR"] = f"{base}/model/"
        env["AIP_CHECKPOINT_DIR"] = f"{base}/checkpoints/"
        env["AIP_TENSORBOARD_LOG_DIR"] = f"{base}/logs/"
    return env


def _with_job(obj: dict, job_json: str) -> str:
    """_dumps({**obj, "job": <the spec>}) with the spec's JSON as given."""
    return f'{_dumps(obj)[:-1]},"job":{job_json}}}'


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))
