"""Stop training when the loss becomes NaN or infinite, before anything is saved.

Keras' TerminateOnNaN reads the loss after every step, which makes the host
wait for each step to finish before queueing the next. This callback reads it
only every `every_steps` steps (the loss in the logs is the running epoch mean,
so a NaN anywhere earlier in the epoch is still visible then) and at each
epoch's end. It must come first in the callback list: raising in its
on_epoch_end keeps BackupAndRestore and ModelCheckpoint from writing the
diverged weights, and fit() never returns, so the model is never saved. Under
MultiWorkerMirroredStrategy every replica sees the same all-reduced loss at the
same step, so all of them stop together.
"""

from __future__ import annotations

import math

import tensorflow as tf

from trainer.errors import TrainingDiverged


class StopOnNaN(tf.keras.callbacks.Callback):
    def __init__(self, every_steps: int):
        super().__init__()
        self._every = max(every_steps, 0)
        self._epoch = 0
        # Logs may stay tensors: only the steps checked are synchronised.
        self._supports_tf_logs = True

    def _implements_train_batch_hooks(self) -> bool:
        return self._every > 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        # `batch` is the 0-based index of the step just finished.
        if self._every and (batch + 1) % self._every == 0:
            self._check(logs, f"epoch {self._epoch + 1}, step {batch + 1}")

    def on_epoch_end(self, epoch, logs=None):
        self._check(logs, f"the end of epoch {epoch + 1}")

    @staticmethod
    def _check(logs, where: str) -> None:
        if not isinstance(logs, dict) or "loss" not in logs:
            return
        try:
            loss = float(logs["loss"])
        except (TypeError, ValueError):  # e.g. a RemoteValue under parameter-server training
            return
        if not math.isfinite(loss):
            raise TrainingDiverged(
                f"training diverged: the loss is {loss} at {where}; stopped without saving the model or a "
                "checkpoint of the diverged weights; the backup of the last finished epoch, if any, is kept "
                "(lower --learning-rate and run again)"
            )
