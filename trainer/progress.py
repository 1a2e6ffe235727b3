"""The per-epoch progress callback (the line format is in trainer/events.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from trainer.events import emit, metrics_dict


class EpochProgress(tf.keras.callbacks.Callback):
    """Emits train_start and one epoch_end line per finished epoch.

    train_start is emitted when the first epoch begins rather than in
    on_train_begin, because only then does Keras know the epoch a restored
    BackupAndRestore run resumes at.
    """

    def __init__(
        self, task: str, epochs: int, steps_per_epoch: int, global_batch: int, start_fields: dict[str, Any],
        resumed_step: Callable[[], int] = lambda: 0,
    ):
        super().__init__()
        self._task = task
        self._epochs = epochs
        # The training stream repeats, so a whole epoch runs exactly this many
        # steps; an epoch resumed mid-way runs fewer, counted in _steps_run.
        self._steps = steps_per_epoch
        self._global_batch = global_batch
        self._start_fields = start_fields
        self._started = False
        self._resumed_step = resumed_step
        self._epoch_start = 0.0
        self._train_seconds: float | None = None
        self._steps_at_start: int | None = None

    def on_epoch_begin(self, epoch, logs=None):
        if not self._started:
            self._started = True
            # initial_step: a preempted attempt saved mid-epoch, and this one goes on from that step.
            emit("train_start", self._task, epochs=self._epochs, initial_epoch=epoch + 1,
                 initial_step=self._resumed_step(), **self._start_fields)
        self._train_seconds = None
        self._steps_at_start = self._optimizer_steps()
        self._epoch_start = time.perf_counter()

    def on_test_begin(self, logs=None):
        # Validation inside fit(): stop the training clock so examples/s is
        # training throughput only.
        if self._train_seconds is None:
            self._train_seconds = time.perf_counter() - self._epoch_start

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._epoch_start
        train_seconds = self._train_seconds if self._train_seconds is not None else seconds
        steps = self._steps_run()
        emit(
            "epoch_end",
            self._task,
            epoch=epoch + 1,
            epochs=self._epochs,
            steps=steps,
            metrics=metrics_dict(logs),
            examples_per_sec=round(steps * self._global_batch / max(train_seconds, 1e-9), 2),
            seconds=round(seconds, 3),
        )

    def _optimizer_steps(self) -> int | None:
        """The optimizer's step counter (restored with the backup, so it goes on from the step a
        preempted attempt saved at). Read once per epoch: counting batches instead would need
        batch hooks, which ParameterServerStrategy refuses and which cost time on every step."""
        optimizer = getattr(self.model, "optimizer", None)
        iterations = getattr(optimizer, "iterations", None)
        return None if iterations is None else int(tf.keras.backend.get_value(iterations))

    def _steps_run(self) -> int:
        """The steps this attempt ran in the epoch: all of them, except in an epoch resumed at a
        step inside it, where the ones an earlier attempt ran are not counted again (they were
        600 of 600 with examples/s 2.5 times too high, issue 47.6)."""
        now = self._optimizer_steps()
        if now is None or self._steps_at_start is None:
            return self._steps
        return now - self._steps_at_start

    @property
    def started(self) -> bool:
        return self._started
