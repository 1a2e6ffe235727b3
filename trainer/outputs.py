"""Check before training that this replica can write where its outputs go.

A model dir the job's service account cannot write to would otherwise fail
only at save time, after the last epoch. A probe file is written and removed
in each directory this replica writes to: the chief writes the SavedModel, the
TensorBoard logs and checkpoints; every MWMS replica writes checkpoint backups
(Keras puts the non-chief ones in temporary dirs under the checkpoint dir); the
evaluator writes its TensorBoard logs.
"""

from __future__ import annotations

import os
import uuid

import tensorflow as tf

from trainer.cluster import ClusterInfo
from trainer.config import TrainConfig
from trainer.errors import ConfigError


def dirs_to_probe(cfg: TrainConfig, cluster: ClusterInfo) -> dict[str, str]:
    if cluster.is_evaluator:
        return {"--tensorboard-dir": cfg.tensorboard_dir}
    if cluster.is_chief:
        return {"--model-dir": cfg.model_dir, "--checkpoint-dir": cfg.checkpoint_dir,
                "--tensorboard-dir": cfg.tensorboard_dir}
    return {"--checkpoint-dir": cfg.checkpoint_dir}


def probe_writable(flag: str, path: str) -> None:
    probe = os.path.join(path, f".trainjobs-write-probe-{uuid.uuid4().hex}")
    try:
        tf.io.gfile.makedirs(path)
        # GCS reports a missing permission when the object is uploaded: on close.
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("trainjobs write probe\n")
        tf.io.gfile.remove(probe)
    except (tf.errors.OpError, OSError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        first = (message.strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"cannot write to {flag} {path}: {first}. Give the job's service account write access there "
            "(for gs:// paths, e.g. roles/storage.objectUser on the bucket) or choose another directory; "
            "checked before training so the run does not fail at save time"
        ) from None


def check_outputs(cfg: TrainConfig, cluster: ClusterInfo) -> None:
    for flag, path in dirs_to_probe(cfg, cluster).items():
        probe_writable(flag, path)
