"""TF_CONFIG parsing: which replica this process is and what cluster it is in.

Pure Python (no TensorFlow) so that a misconfigured replica fails in
milliseconds, before the seconds-long TensorFlow import.

Vertex AI writes TF_CONFIG as
  {"cluster": {"chief": [...], "worker": [...], "ps": [...]},
   "task": {"type": "chief", "index": 0, "trial": "1"},
   "environment": "cloud", "job": {<CustomJobSpec>}}
and legacy AI Platform wrote "master" instead of "chief". TensorFlow's own
resolver knows neither "master" nor what to do with the extra keys, so the
trainer rewrites TF_CONFIG into the plain form before any strategy reads it
(`ClusterInfo.tf_config_json`).

Vertex also sets CLUSTER_SPEC on every replica (pools named workerpool0..3) and
leaves TF_CONFIG out for single-replica jobs, so a tuning trial id of a
single-replica job is only there. A launcher that sets CLUSTER_SPEC alone for
a multi-replica job gets it translated (`parse_environment`) rather than every
replica silently training alone as chief:0 into the same model dir.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from trainer.errors import ConfigError

CHIEF, WORKER, PS, EVALUATOR = "chief", "worker", "ps", "evaluator"
_ROLES = (CHIEF, WORKER, PS, EVALUATOR)
# Pools that take part in training; the evaluator is a sidecar and never in the
# cluster TensorFlow sees (Vertex leaves it out too).
_TRAINING_POOLS = (CHIEF, WORKER, PS)
# CLUSTER_SPEC's pools in Vertex's fixed positions; pool 2 is either parameter
# servers or Google's Reduction Server (see _has_reduction_server).
_POOL_ROLES = {"workerpool0": CHIEF, "workerpool1": WORKER, "workerpool2": PS, "workerpool3": EVALUATOR}


@dataclass(frozen=True)
class ClusterInfo:
    task_type: str = CHIEF
    task_index: int = 0
    cluster: dict[str, list[str]] = field(default_factory=dict)
    # Hyperparameter-tuning trial id (Vertex sets it only for tuning jobs).
    trial: str | None = None
    # What TF_CONFIG called the role ("master" on legacy AI Platform).
    raw_task_type: str = CHIEF
    # The job's pool 2 runs Google's Reduction Server (from the job spec Vertex
    # puts in TF_CONFIG / CLUSTER_SPEC).
    reduction_server: bool = False
    # The job has an evaluator pool (from the job spec or CLUSTER_SPEC); None: nothing says.
    has_evaluator: bool | None = None

    @property
    def task_name(self) -> str:
        return f"{self.task_type}:{self.task_index}"

    @property
    def num_workers(self) -> int:
        """Replicas that compute gradients: chief plus workers."""
        return len(self.cluster.get(CHIEF, [])) + len(self.cluster.get(WORKER, []))

    @property
    def has_ps(self) -> bool:
        return bool(self.cluster.get(PS))

    @property
    def is_multi_worker(self) -> bool:
        return self.num_workers > 1 or self.has_ps

    @property
    def is_chief(self) -> bool:
        """The replica whose outputs (SavedModel, TensorBoard) are the real ones.

        Without a chief pool TensorFlow treats worker 0 as the chief.
        """
        if self.task_type == CHIEF:
            return True
        return self.task_type == WORKER and self.task_index == 0 and not self.cluster.get(CHIEF)

    @property
    def is_evaluator(self) -> bool:
        return self.task_type == EVALUATOR

    @property
    def address(self) -> str | None:
        """This replica's host:port in the training cluster (None outside it)."""
        pool = self.cluster.get(self.task_type, [])
        return pool[self.task_index] if self.task_index < len(pool) else None

    def peers_to_wait_for(self, strategy: str) -> dict[str, str]:
        """The tasks (name -> address) this replica cannot start training without.

        MWMS: every other chief/worker (all of them join one collective group).
        Parameter-server training: the chief (coordinator) needs every worker and
        ps; those only serve and wait for nobody.
        """
        if self.is_evaluator:
            return {}
        if strategy == "mwms":
            roles = (CHIEF, WORKER)
        elif strategy == "parameter_server" and self.task_type == CHIEF:
            roles = (WORKER, PS)
        else:
            return {}
        return {f"{role}:{i}": address for role in roles for i, address in enumerate(self.cluster.get(role, []))
                if (role, i) != (self.task_type, self.task_index)}

    def tf_config_json(self) -> str:
        """TF_CONFIG in the form TensorFlow's TFConfigClusterResolver expects."""
        return json.dumps(
            {"cluster": self.cluster, "task": {"type": self.task_type, "index": self.task_index}}
        )


def parse_tf_config(text: str | None) -> ClusterInfo:
    """Parse TF_CONFIG; no TF_CONFIG (or an empty one) means a single-replica job."""
    if text is None or not text.strip():
        return ClusterInfo()
    doc = _load_json(text, "TF_CONFIG")

    cluster = _training_cluster(doc.get("cluster") or {})
    reduction_server = _has_reduction_server(doc.get("job"))
    if reduction_server:
        # Pool 2 runs Google's reducers, which are no TensorFlow tasks. Should a launcher
        # list them as "ps" (not seen here: no Vertex AI access), MWMS would refuse the cluster.
        cluster.pop(PS, None)
    if len(cluster.get(CHIEF, [])) > 1:
        raise ConfigError("TF_CONFIG cluster has more than one chief")

    task = doc.get("task") or {}
    if not isinstance(task, dict):
        raise ConfigError("TF_CONFIG 'task' must be an object")
    if not task and not cluster:
        return ClusterInfo()
    raw_type, task_type, index = _this_task(task, cluster)
    trial = task.get("trial")
    return ClusterInfo(
        task_type=task_type,
        task_index=index,
        cluster=cluster,
        trial=None if trial in (None, "") else str(trial),
        raw_task_type=raw_type,
        reduction_server=reduction_server,
        has_evaluator=True if task_type == EVALUATOR else _has_evaluator_pool(doc.get("job")),
    )


def _training_cluster(raw_cluster: object) -> dict[str, list[str]]:
    """TF_CONFIG's cluster as TensorFlow takes it: master named chief, the training pools
    only (an evaluator is no member), no empty pool."""
    if not isinstance(raw_cluster, dict):
        raise ConfigError("TF_CONFIG 'cluster' must be an object of role -> list of host:port")
    if "master" in raw_cluster and CHIEF in raw_cluster:
        raise ConfigError("TF_CONFIG cluster has both 'master' and 'chief'; expected one of them")
    cluster: dict[str, list[str]] = {}
    for role, addresses in raw_cluster.items():
        role = CHIEF if role == "master" else role
        if role not in _ROLES:
            raise ConfigError(f"TF_CONFIG cluster has unknown role {role!r}")
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise ConfigError(f"TF_CONFIG cluster[{role!r}] must be a list of host:port strings")
        if role in _TRAINING_POOLS and addresses:
            cluster[role] = list(addresses)
    return cluster


def _this_task(task: dict, cluster: dict[str, list[str]]) -> tuple[str, str, int]:
    """(the type as written, the type with master named chief, the index) of TF_CONFIG's task,
    which must be in the cluster unless it is the evaluator."""
    raw_type = task.get("type")
    if not isinstance(raw_type, str):
        raise ConfigError("TF_CONFIG has a cluster but no task.type")
    task_type = CHIEF if raw_type == "master" else raw_type
    if task_type not in _ROLES:
        raise ConfigError(f"TF_CONFIG task.type {raw_type!r} is not one of chief, master, worker, ps, evaluator")
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise ConfigError(f"TF_CONFIG task.index {task.get('index')!r} is not an integer") from None
    if task_type != EVALUATOR:
        pool = cluster.get(task_type, [])
        if not 0 <= index < len(pool):
            raise ConfigError(
                f"TF_CONFIG task {task_type}:{index} is not in the cluster "
                f"({task_type} has {len(pool)} address(es))"
            )
    elif index < 0:
        raise ConfigError(f"TF_CONFIG task.index {index} is negative")
    return raw_type, task_type, index


def parse_environment(environ: Mapping[str, str]) -> ClusterInfo:
    """This replica's role from TF_CONFIG, else from CLUSTER_SPEC.

    The trial id is taken from CLUSTER_SPEC when TF_CONFIG has none: Vertex
    sets no TF_CONFIG for single-replica jobs, tuning trials included.
    """
    tf_config = environ.get("TF_CONFIG")
    cluster_spec = environ.get("CLUSTER_SPEC")
    spec_doc = _load_json(cluster_spec, "CLUSTER_SPEC") if cluster_spec and cluster_spec.strip() else None
    if tf_config and tf_config.strip():
        info = parse_tf_config(tf_config)
    elif spec_doc is not None:
        info = parse_tf_config(json.dumps(_tf_config_from_cluster_spec(spec_doc)))
    else:
        return ClusterInfo()
    if info.trial is None and spec_doc is not None:
        trial = (spec_doc.get("task") or {}).get("trial") if isinstance(spec_doc.get("task"), dict) else None
        if trial not in (None, ""):
            info = replace(info, trial=str(trial))
    if not info.reduction_server and spec_doc is not None and _has_reduction_server(spec_doc.get("job")):
        info = replace(info, reduction_server=True)
    if info.has_evaluator is None and spec_doc is not None and isinstance(spec_doc.get("cluster"), dict):
        # CLUSTER_SPEC lists every pool of the job.
        info = replace(info, has_evaluator=bool(spec_doc["cluster"].get("workerpool3")))
    return info


def _load_json(text: str, name: str):
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{name} must be a JSON object")
    return doc


def _tf_config_from_cluster_spec(doc: dict) -> dict:
    """CLUSTER_SPEC (workerpool0..3) -> the TF_CONFIG Vertex would have set."""
    pools = doc.get("cluster") or {}
    task = doc.get("task") or {}
    if not isinstance(pools, dict) or not isinstance(task, dict):
        raise ConfigError("CLUSTER_SPEC must have a 'cluster' object and a 'task' object")
    unknown = sorted(set(pools) - set(_POOL_ROLES))
    if unknown:
        raise ConfigError(f"CLUSTER_SPEC has unknown pools {unknown}; expected workerpool0..workerpool3")
    replicas = sum(len(v) for v in pools.values() if isinstance(v, list))
    pool = task.get("type")
    if replicas <= 1:
        return {}  # a single replica: Vertex would set no TF_CONFIG either
    if pool not in _POOL_ROLES:
        raise ConfigError(f"CLUSTER_SPEC task.type {pool!r} is not one of {', '.join(_POOL_ROLES)}")
    job = doc.get("job")
    reduction = _has_reduction_server(job)
    if pools.get("workerpool2") and not isinstance(job, dict):
        # Pool 2 is parameter servers or Reduction Server; only the job spec says which.
        raise ConfigError("CLUSTER_SPEC has a workerpool2 but no 'job' spec, so the trainer cannot tell parameter "
                          "servers from Reduction Server; set TF_CONFIG as Vertex AI does")
    if pool == "workerpool2" and reduction:
        raise ConfigError("this replica is in the Reduction Server pool (workerpool2), which runs Google's "
                          "reducer image, not the trainer")
    cluster = {}
    for name, addresses in pools.items():
        role = _POOL_ROLES[name]
        if role == EVALUATOR or (name == "workerpool2" and reduction):
            continue  # neither is part of the TensorFlow cluster
        cluster[role] = addresses
    out_task = {"type": _POOL_ROLES[pool], "index": task.get("index", 0)}
    return {"cluster": cluster, "task": out_task, "job": job}


def _job_pools(job) -> list | None:
    if not isinstance(job, dict):
        return None
    pools = job.get("worker_pool_specs") or job.get("workerPoolSpecs")
    return pools if isinstance(pools, list) else None


def _has_evaluator_pool(job) -> bool | None:
    """Pool 3 of the job spec is the evaluator's; None when there is no job spec."""
    pools = _job_pools(job)
    if pools is None:
        return None
    return len(pools) > 3 and isinstance(pools[3], dict) and bool(pools[3])


def _has_reduction_server(job) -> bool:
    """Does pool 2 of the job spec (either JSON field naming) run Google's reducer image?"""
    pools = _job_pools(job) or []
    if len(pools) < 3 or not isinstance(pools[2], dict):
        return False
    container = pools[2].get("container_spec") or pools[2].get("containerSpec") or {}
    image = (container.get("image_uri") or container.get("imageUri") or "") if isinstance(container, dict) else ""
    return isinstance(image, str) and image.rsplit("/", 1)[-1].startswith("reductionserver")


def check_role(cluster: ClusterInfo, strategy: str) -> None:
    """Refuse combinations that would otherwise hang or crash deep inside TensorFlow.

    A parameter server under a synchronous all-reduce strategy would never be
    contacted by anyone and would wait forever, and MWMS refuses a cluster with
    a ps pool; both are configuration mistakes the job author must see at once.
    """
    if strategy == "parameter_server":
        if cluster.is_evaluator:
            return
        if not cluster.has_ps:
            raise ConfigError("--strategy=parameter_server needs a TF_CONFIG cluster with a 'ps' pool")
        if not cluster.cluster.get(CHIEF):
            raise ConfigError("--strategy=parameter_server needs a chief (the coordinator) in TF_CONFIG")
        return
    if cluster.task_type == PS:
        raise ConfigError(
            f"this replica is a parameter server ({cluster.task_name}) but --strategy={strategy}; "
            "parameter servers only work with --strategy=parameter_server "
            "(MultiWorkerMirroredStrategy needs no ps pool: remove it from the job)"
        )
    if cluster.has_ps:
        raise ConfigError(
            f"TF_CONFIG has a 'ps' pool but --strategy={strategy}; use --strategy=parameter_server "
            "or remove the parameter-server pool"
        )
    if strategy in ("mirrored", "default") and cluster.num_workers > 1:
        # Each replica would silently train its own model on all the data.
        raise ConfigError(
            f"--strategy={strategy} trains on one machine but TF_CONFIG describes "
            f"{cluster.num_workers} training replicas; use --strategy=auto or mwms"
        )
