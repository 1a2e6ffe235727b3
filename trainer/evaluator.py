"""The `evaluator` replica: sidecar evaluation of the chief's per-epoch checkpoints.

It trains nothing and is not part of the training cluster: it watches
<checkpoint_dir>/epochs, evaluates each new checkpoint on the validation data
as it appears (skipping ahead if it falls behind, as sidecar evaluators do),
and exits once the checkpoint of the last epoch has been evaluated, or the
chief has marked training done and nothing newer is left.
"""

from __future__ import annotations

import os
import sys
import time

import tensorflow as tf

from trainer import checkpoints
from trainer.cluster import ClusterInfo
from trainer.config import TrainConfig
from trainer.data import make_inputs
from trainer.errors import ConfigError
from trainer.events import emit, metrics_dict
from trainer.model import build_model, compile_model

# How long one wait for a new checkpoint lasts before the "is training done?" check.
_POLL_SECONDS = 2


def run_sidecar(cfg: TrainConfig, cluster: ClusterInfo) -> int:
    task = cluster.task_name
    if cfg.keep_checkpoints == 0:
        raise ConfigError("the evaluator reads the per-epoch checkpoints, which --keep-checkpoints=0 turns off")
    watch_dir = checkpoints.epochs_dir(cfg.checkpoint_dir)
    model, validation = _model_and_validation(cfg)
    writer = tf.summary.create_file_writer(os.path.join(cfg.tensorboard_dir, "evaluator"))
    emit("train_start", task, role="evaluator", epochs=cfg.epochs, checkpoint_dir=watch_dir)

    evaluated: list[int] = []
    watch = _Watch(cfg, watch_dir)
    for path in tf.train.checkpoints_iterator(
        watch_dir, min_interval_secs=0, timeout=_POLL_SECONDS, timeout_fn=watch.stop_waiting
    ):
        watch.saw(path)
        epoch = checkpoints.epoch_of(path)
        if not _evaluate(model, path, epoch, validation, writer, task, cfg.epochs):
            continue
        if epoch is not None:
            evaluated.append(epoch)
        done = checkpoints.read_done_marker(cfg.checkpoint_dir)
        if (epoch is not None and epoch >= cfg.epochs) or (done is not None and epoch == done):
            break

    emit("train_end", task, role="evaluator", model_dir=cfg.model_dir, evaluated_epochs=evaluated)
    if watch.timed_out:
        print(f"evaluator: no new checkpoint in {watch_dir} for {cfg.evaluator_timeout:g} s; giving up",
              file=sys.stderr, flush=True)
        return 1
    return 0


def _model_and_validation(cfg: TrainConfig) -> tuple[tf.keras.Model, tf.data.Dataset]:
    # One replica on one device: the global batch is the per-replica batch.
    inputs = make_inputs(cfg, global_batch=cfg.batch_size, num_workers=1)
    if inputs.validation is None:
        raise ConfigError("the evaluator needs validation data (--eval-split, --eval-files "
                          "or --synthetic-eval-examples)")
    # Weights come from the checkpoints; never download ImageNet weights just
    # to overwrite them.
    model = build_model(cfg.model, inputs.num_classes, cfg.image_size, weights="none",
                        fine_tune_layers=cfg.fine_tune_layers)
    compile_model(model, cfg.learning_rate)
    return model, inputs.validation


class _Watch:
    """When to stop waiting for the next checkpoint: training is done and nothing newer is
    left, or --evaluator-timeout passed without a new one (then `timed_out`)."""

    def __init__(self, cfg: TrainConfig, watch_dir: str):
        self._cfg, self._dir = cfg, watch_dir
        self._last_path: str | None = None
        self._last_new = time.monotonic()
        self.timed_out = False

    def saw(self, path: str) -> None:
        self._last_path, self._last_new = path, time.monotonic()

    def stop_waiting(self) -> bool:
        if checkpoints.read_done_marker(self._cfg.checkpoint_dir) is not None:
            # Training is over; stop unless a checkpoint slipped in meanwhile.
            latest = tf.train.latest_checkpoint(self._dir)
            if latest is None or latest == self._last_path:
                return True
            return False
        timeout = self._cfg.evaluator_timeout
        if timeout is not None and time.monotonic() - self._last_new > timeout:
            self.timed_out = True
            return True
        return False


def _evaluate(model: tf.keras.Model, path: str, epoch: int | None, validation: tf.data.Dataset, writer,
              task: str, epochs: int) -> bool:
    """Evaluates one checkpoint and reports it; False when it was gone before it could be read."""
    try:
        # The checkpoint also holds optimizer slots, which evaluation does not need.
        model.load_weights(path).expect_partial()
    except (tf.errors.NotFoundError, tf.errors.DataLossError) as exc:
        # Pruned by the chief before we got to it: the next one will come.
        print(f"evaluator: skipping {path}: {type(exc).__name__}", file=sys.stderr, flush=True)
        return False
    logs = model.evaluate(validation, verbose=0, return_dict=True)
    with writer.as_default():
        for name, value in logs.items():
            tf.summary.scalar(name, value, step=epoch or 0)
    writer.flush()
    emit("evaluation", task, epoch=epoch, epochs=epochs, checkpoint=path, metrics=metrics_dict(logs))
    return True
