"""A preempted replica saves where it is, so that the next attempt goes on from that step.

SIGTERM is how every backend asks a replica to stop: the local and Slurm backends when the
service preempts or cancels a job (then SIGKILL after a grace period), Vertex AI when a VM is
preempted or the job cancelled. trainer/notice.py hears it and sets a flag. At the end of a step
this callback asks whether any replica got it; under MultiWorkerMirroredStrategy that question
is one all-reduce every --preemption-check-steps steps, so every replica sees the same answer
at the same step and all of them save together (a checkpoint of mirrored variables is a
collective operation) and exit with 128 + SIGTERM. BackupAndRestore then restores the step, not
only the epoch.

tf.distribute's own PreemptionCheckpointHandler (and Keras' save_before_preemption) does the
same only on Google Cloud VMs or Borg (it asks the GCE metadata server), not on this machine or
Slurm nodes; this is that protocol with SIGTERM as the notice, everywhere.
"""

from __future__ import annotations

import os
import sys

import tensorflow as tf

from trainer.events import emit, note
from trainer.notice import EXIT_CODE, Notice

# BackupAndRestore restores the step only when it saves by steps; this many never comes, so it
# saves at each epoch's end (below) and when preempted, and restores either to the step.
_NEVER = 2**62


class SaveOnPreemption(tf.keras.callbacks.BackupAndRestore):
    """BackupAndRestore that also saves at the step a preemption notice arrives."""

    def __init__(self, backup_dir: str, notice: Notice, strategy: tf.distribute.Strategy, *, check_steps: int,
                 steps_per_epoch: int, multi_worker: bool):
        super().__init__(backup_dir, save_freq=_NEVER)
        self._notice = notice
        self._check_steps = max(1, check_steps)
        self._steps_per_epoch = steps_per_epoch
        self._agree = _any_replica(strategy) if multi_worker else None
        self.resumed_at: tuple[int, int] | None = None      # (epoch, step), 1-based epoch, 0-based step

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        state = self.model._training_state
        epoch = int(tf.keras.backend.get_value(state._ckpt_saved_epoch))
        batch = int(tf.keras.backend.get_value(state._ckpt_saved_batch))
        if epoch >= 0 and batch >= 0:
            done_epoch = batch == self._steps_per_epoch - 1
            self.resumed_at = (epoch + 2, 0) if done_epoch else (epoch + 1, batch + 1)

    def on_epoch_end(self, epoch, logs=None):
        self._backup(epoch=epoch)          # every epoch, as save_freq="epoch" would

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if (batch + 1) % self._check_steps:
            return
        given = self._notice.given
        if self._agree is not None:
            given = self._agree(given)
        if not given:
            return
        self._backup(epoch=self._current_epoch, batch=batch)
        emit("preempted", self._notice.task, epoch=self._current_epoch + 1, step=batch + 1,
             global_step=self._current_epoch * self._steps_per_epoch + batch + 1)
        note(f"{self._notice.task} saved its state at epoch {self._current_epoch + 1}, step {batch + 1}; exiting")
        sys.stderr.flush()
        os._exit(EXIT_CODE)


def _any_replica(strategy: tf.distribute.Strategy):
    """A function: has any replica of the cluster been given notice? One all-reduce."""

    @tf.function
    def total(flag):
        per_replica = strategy.run(lambda: tf.identity(flag))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return lambda given: bool(total(tf.constant(1 if given else 0, tf.int64)).numpy() > 0)
