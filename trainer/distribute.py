"""Choosing and creating the tf.distribute strategy; where each replica saves.

The strategy must be the first TensorFlow object a replica creates: MWMS
configures the collective ops of the TensorFlow runtime, which is only
possible before anything else has initialised it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import tensorflow as tf

from trainer.cluster import ClusterInfo


def choose_strategy(requested: str, cluster: ClusterInfo, num_gpus: int) -> str:
    """Resolve --strategy=auto: MWMS for a cluster, Mirrored for several local
    GPUs, else the default (single-device) strategy."""
    if requested != "auto":
        return requested
    if cluster.is_multi_worker:
        return "mwms"
    if num_gpus > 1:
        return "mirrored"
    return "default"


def create_strategy(name: str, cluster: ClusterInfo, all_reduce: str = "RING") -> tf.distribute.Strategy:
    """`all_reduce` (NCCL or RING, see hardware.all_reduce) is MWMS's collective
    implementation; TensorFlow's own AUTO never picks NCCL."""
    if name in ("mwms", "parameter_server"):
        # TensorFlow's resolver reads TF_CONFIG itself and understands neither
        # "master" nor Vertex's extra keys: hand it the normalised form.
        if cluster.cluster:
            os.environ["TF_CONFIG"] = cluster.tf_config_json()
        else:
            os.environ.pop("TF_CONFIG", None)
    if name == "mwms":
        from trainer.hardware import communication_options

        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=communication_options(all_reduce))
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "parameter_server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        num_ps = len(cluster.cluster.get("ps", []))
        # Spread large variables (embeddings, big dense kernels) over the ps tasks.
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=256 << 10, max_shards=num_ps
        )
        return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
    raise ValueError(f"unknown strategy {name!r}")


def counted_by_chief(strategy: tf.distribute.Strategy, cluster: ClusterInfo):
    """A record counter for data.make_inputs under MWMS: the chief reads the
    files, and one all-reduce hands its count to every replica (which all need
    the same steps per epoch), instead of every replica reading everything."""
    from trainer.data import count_records

    def count(files: list[str]) -> int:
        local = tf.constant(count_records(files) if cluster.is_chief else 0, tf.int64)

        def only_first_replica():
            # Replica 0 is the chief's first device.
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return tf.where(tf.equal(replica, 0), local, tf.zeros_like(local))

        per_replica = tf.function(lambda: strategy.run(only_first_replica))()
        return int(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))

    return count


def run_server(cluster: ClusterInfo) -> None:
    """Parameter-server training: ps and worker tasks only serve the chief
    (the coordinator) and block until the job is torn down."""
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=cluster.task_type,
        task_index=cluster.task_index,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    server.join()


def set_mixed_precision(enabled: bool) -> str:
    """float16 on GPUs (Tensor Cores); bfloat16 on CPUs, where float16 is slow."""
    policy = "float32"
    if enabled:
        policy = "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"
    tf.keras.mixed_precision.set_global_policy(policy)
    return policy


@contextmanager
def save_dir(model_dir: str, is_chief: bool) -> Iterator[str]:
    """Where this replica writes the SavedModel.

    Saving runs collective ops, so every MWMS replica must save; only the
    chief's copy is the real one. The others write to a fresh local temporary
    directory that is removed afterwards (local: no bucket traffic, and unique
    per process by construction).
    """
    if is_chief:
        yield model_dir
        return
    temp = tempfile.mkdtemp(prefix="trainer-worker-save-")
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)
