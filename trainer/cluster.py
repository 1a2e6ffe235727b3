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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from trainer.errors import ConfigError

CHIEF, WORKER, PS, EVALUATOR = "chief", "worker", "ps", "evaluator"
_ROLES = (CHIEF, WORKER, PS, EVALUATOR)
# Pools that take part in training; the evaluator is a sidecar and never in the
# cluster TensorFlow sees (Vertex leaves it out too).
_TRAINING_POOLS = (CHIEF, WORKER, PS)


@dataclass(frozen=True)
class ClusterInfo:
    task_type: str = CHIEF
    task_index: int = 0
    cluster: dict[str, list[str]] = field(default_factory=dict)
    # Hyperparameter-tuning trial id (Vertex sets it only for tuning jobs).
    trial: str | None = None
    # What TF_CONFIG called the role ("master" on legacy AI Platform).
    raw_task_type: str = CHIEF

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

    def tf_config_json(self) -> str:
        """TF_CONFIG in the form TensorFlow's TFConfigClusterResolver expects."""
        return json.dumps(
            {"cluster": self.cluster, "task": {"type": self.task_type, "index": self.task_index}}
        )


def parse_tf_config(text: str | None) -> ClusterInfo:
    """Parse TF_CONFIG; no TF_CONFIG (or an empty one) means a single-replica job."""
    if text is None or not text.strip():
        return ClusterInfo()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"TF_CONFIG is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError("TF_CONFIG must be a JSON object")

    raw_cluster = doc.get("cluster") or {}
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
    if len(cluster.get(CHIEF, [])) > 1:
        raise ConfigError("TF_CONFIG cluster has more than one chief")

    task = doc.get("task") or {}
    if not isinstance(task, dict):
        raise ConfigError("TF_CONFIG 'task' must be an object")
    if not task and not cluster:
        return ClusterInfo()
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
    trial = task.get("trial")
    return ClusterInfo(
        task_type=task_type,
        task_index=index,
        cluster=cluster,
        trial=None if trial in (None, "") else str(trial),
        raw_task_type=raw_type,
    )


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
