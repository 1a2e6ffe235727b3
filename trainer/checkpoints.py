"""Layout of the checkpoint directory, shared by the trainers and the evaluator.

  <checkpoint_dir>/backup/          BackupAndRestore: the state to resume from
                                    after a replica dies (deleted when fit ends)
  <checkpoint_dir>/epochs/ckpt-NNNN weights after epoch NNNN, for the sidecar
                                    evaluator; the newest --keep-checkpoints stay
  <checkpoint_dir>/epochs/TRAINING_DONE  written by the chief when fit returns,
                                    so the evaluator knows no more will come

Two directories because BackupAndRestore deletes its own at the end of training,
while the evaluator may still be catching up.
"""

from __future__ import annotations

import json
import os
import re

import tensorflow as tf

DONE_MARKER = "TRAINING_DONE"
_CKPT_RE = re.compile(r"ckpt-(\d+)$")


def backup_dir(checkpoint_dir: str) -> str:
    return os.path.join(checkpoint_dir, "backup")


def epochs_dir(checkpoint_dir: str) -> str:
    return os.path.join(checkpoint_dir, "epochs")


def epoch_checkpoint_pattern(checkpoint_dir: str) -> str:
    # Keras fills {epoch} with the 1-based epoch number.
    return os.path.join(epochs_dir(checkpoint_dir), "ckpt-{epoch:04d}")


def epoch_of(checkpoint_path: str) -> int | None:
    match = _CKPT_RE.search(checkpoint_path)
    return int(match.group(1)) if match else None


def done_marker(checkpoint_dir: str) -> str:
    return os.path.join(epochs_dir(checkpoint_dir), DONE_MARKER)


def write_done_marker(checkpoint_dir: str, last_epoch: int) -> None:
    tf.io.gfile.makedirs(epochs_dir(checkpoint_dir))
    with tf.io.gfile.GFile(done_marker(checkpoint_dir), "w") as f:
        f.write(json.dumps({"last_epoch": last_epoch}))


def read_done_marker(checkpoint_dir: str) -> int | None:
    """The last epoch of a finished run, or None while training goes on."""
    path = done_marker(checkpoint_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return int(json.loads(f.read())["last_epoch"])


def clear_done_marker(checkpoint_dir: str) -> None:
    path = done_marker(checkpoint_dir)
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


class PruneEpochCheckpoints(tf.keras.callbacks.Callback):
    """Keeps the newest `keep` per-epoch checkpoints (chief only; runs after
    ModelCheckpoint in the callback list)."""

    def __init__(self, checkpoint_dir: str, keep: int):
        super().__init__()
        self._dir = epochs_dir(checkpoint_dir)
        self._keep = keep

    def on_epoch_end(self, epoch, logs=None):
        # A checkpoint is several files: ckpt-0003.index, ckpt-0003.data-00000-of-00001.
        files = {f: epoch_of(os.path.basename(f).split(".", 1)[0])
                 for f in tf.io.gfile.glob(os.path.join(self._dir, "ckpt-*"))}
        epochs = sorted({e for e in files.values() if e is not None})
        stale = set(epochs[: max(len(epochs) - self._keep, 0)])
        for f, e in files.items():
            if e in stale:
                tf.io.gfile.remove(f)
