"""The callbacks of a training replica, in the order they must run.

None of them does work on every step: the NaN guard reads the loss every
--nan-check-steps steps, everything else works once per epoch (bench/trainer.py
measures what they cost against a plain model.fit).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainer import checkpoints
from trainer.cluster import ClusterInfo
from trainer.config import TrainConfig
from trainer.divergence import StopOnNaN
from trainer.progress import EpochProgress


def training_callbacks(
    cfg: TrainConfig,
    cluster: ClusterInfo,
    *,
    steps_per_epoch: int,
    global_batch: int,
    start_fields: dict[str, Any],
    parameter_server: bool = False,
) -> list[tf.keras.callbacks.Callback]:
    # 1. The NaN guard first: raising before the others' on_epoch_end keeps
    #    diverged weights out of the backup and the checkpoints. Batch hooks
    #    are refused under parameter-server training: epoch ends only there.
    callbacks: list[tf.keras.callbacks.Callback] = [StopOnNaN(0 if parameter_server else cfg.nan_check_steps)]
    # 2. The backup is written before the epoch line goes out, so a replica
    #    killed right after printing epoch N resumes at N+1.
    callbacks.append(tf.keras.callbacks.BackupAndRestore(checkpoints.backup_dir(cfg.checkpoint_dir)))
    if cfg.keep_checkpoints:
        # All replicas: Keras routes non-chief copies to temp dirs it deletes.
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(
            checkpoints.epoch_checkpoint_pattern(cfg.checkpoint_dir), save_weights_only=True))
        if cluster.is_chief:
            callbacks.append(checkpoints.PruneEpochCheckpoints(cfg.checkpoint_dir, cfg.keep_checkpoints))
    if cluster.is_chief:
        callbacks.append(tf.keras.callbacks.TensorBoard(
            cfg.tensorboard_dir, update_freq="epoch", profile_batch=0,
            # Keras writes the graph only from a batch hook (so it never did before the NaN guard
            # added one); writing it now would cost the first step and trip Keras' slow-callback warning.
            write_graph=False))
        # Progress lines come from the chief only: every replica reports the
        # same all-reduced metrics, and the service reads the chief's.
        callbacks.append(EpochProgress(cluster.task_name, cfg.epochs, steps_per_epoch, global_batch, start_fields))
    return callbacks
