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
from trainer.preemption import Notice, SaveOnPreemption
from trainer.progress import EpochProgress


def epoch_checkpoints_to_keep(cfg: TrainConfig, cluster: ClusterInfo) -> int:
    if cfg.keep_checkpoints is not None:
        return cfg.keep_checkpoints
    return 0 if cluster.has_evaluator is False else 2


class EpochTensorBoard(tf.keras.callbacks.TensorBoard):
    """TensorBoard that works once per epoch only.

    Keras calls every callback's batch hooks once any callback has some (the NaN
    guard does). TensorBoard's would then log each step's metrics as scalars,
    to no writer under update_freq="epoch" (bench: ~3 ms a step on 2 CPU
    cores), and write the model graph from the first step. With
    update_freq="epoch", profile_batch=0 and write_graph=False there is
    nothing for them to do.
    """

    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        pass


def training_callbacks(
    cfg: TrainConfig,
    cluster: ClusterInfo,
    *,
    steps_per_epoch: int,
    global_batch: int,
    start_fields: dict[str, Any],
    parameter_server: bool = False,
    preemption: tuple[Notice, tf.distribute.Strategy, bool] | None = None,
) -> list[tf.keras.callbacks.Callback]:
    """preemption: (the SIGTERM notice, the strategy, whether several workers must agree) to save
    at the step a preemption arrives; None keeps epoch-only backups (parameter-server training,
    where batch hooks are refused)."""
    # 1. The NaN guard first: raising before the others' on_epoch_end keeps
    #    diverged weights out of the backup and the checkpoints. Batch hooks
    #    are refused under parameter-server training: epoch ends only there.
    callbacks: list[tf.keras.callbacks.Callback] = [StopOnNaN(0 if parameter_server else cfg.nan_check_steps)]
    # 2. The backup is written before the epoch line goes out, so a replica
    #    killed right after printing epoch N resumes at N+1.
    backup: tf.keras.callbacks.BackupAndRestore
    if preemption is None:
        backup = tf.keras.callbacks.BackupAndRestore(checkpoints.backup_dir(cfg.checkpoint_dir))
    else:
        notice, strategy, multi_worker = preemption
        backup = SaveOnPreemption(checkpoints.backup_dir(cfg.checkpoint_dir), notice, strategy,
                                  check_steps=cfg.preemption_check_steps, steps_per_epoch=steps_per_epoch,
                                  multi_worker=multi_worker)
    callbacks.append(backup)
    keep = epoch_checkpoints_to_keep(cfg, cluster)
    if keep:
        # Only the evaluator reads them, and they cost as much as the backup (bench/trainer.py).
        # All replicas: Keras routes non-chief copies to temp dirs it deletes.
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(
            checkpoints.epoch_checkpoint_pattern(cfg.checkpoint_dir), save_weights_only=True))
        if cluster.is_chief:
            callbacks.append(checkpoints.PruneEpochCheckpoints(cfg.checkpoint_dir, keep))
    if cluster.is_chief:
        callbacks.append(EpochTensorBoard(cfg.tensorboard_dir, update_freq="epoch", profile_batch=0,
                                          write_graph=False))
        # Progress lines come from the chief only: every replica reports the
        # same all-reduced metrics, and the service reads the chief's.
        callbacks.append(EpochProgress(cluster.task_name, cfg.epochs, steps_per_epoch, global_batch, start_fields,
                                       resumed_step=lambda: _resumed_step(backup)))
    return callbacks


def _resumed_step(backup: tf.keras.callbacks.BackupAndRestore) -> int:
    at = getattr(backup, "resumed_at", None)
    return at[1] if at else 0
