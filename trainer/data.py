"""Input pipelines: TFDS, TFRecord shards, synthetic; batch and step arithmetic.

Every source ends in the same shape: (float32 image in [0, 255] of
image_size x image_size x 3, int32 label), batched at the *global* batch size
(MWMS splits each global batch across replicas). Model-specific normalisation
lives in the model, so a SavedModel takes raw pixels.

Multi-worker sharding follows the seed codelab: FILE when there are at least
as many TFRecord shards as workers (each worker reads only its files), DATA
otherwise (every worker reads everything and keeps its share of elements). DATA
only splits correctly if all workers see the same element order, so shuffles
are seeded and the parallel maps stay ordered whenever DATA sharding is in play.

TFRecords are checked before training: the first record must be a
tf.train.Example with the image and label features the flags name (the error
lists the features it does have). The number of training examples comes from
the file names when they follow the NAME-NN-SIZE.tfrec convention of Kaggle's
and the Docker/TFRecords blog's datasets; otherwise it is counted by reading the
files once, on the chief only under MWMS (see `distribute.counted_by_chief`).
"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from trainer.batches import global_batch_size, steps_per_epoch
from trainer.config import TrainConfig
from trainer.images import AUTOTUNE, _finish, decode_for_eval, decode_for_training
from trainer.synthetic import SYNTHETIC_CLASSES, _synthetic_colours, synthetic_dataset
from trainer.tfds_source import tfds_split
from trainer.tfrecords import (
    check_example_features,
    count_records,
    first_record,
    size_from_name,
    sizes_from_names,
    tfrecord_files,
    tfrecord_records,
)

# The pipeline's parts live in their own modules (batches, images, tfrecords, tfds_source,
# synthetic); this module assembles them, and callers keep reading them from here.
__all__ = ["AUTOTUNE", "SYNTHETIC_CLASSES", "Inputs", "check_example_features", "check_tfrecord_inputs",
           "count_records", "decode_for_eval", "decode_for_training", "first_record", "global_batch_size",
           "make_inputs", "size_from_name", "sizes_from_names", "steps_per_epoch", "synthetic_dataset",
           "tfds_split", "tfrecord_files", "tfrecord_records", "_synthetic_colours"]


@dataclass
class Inputs:
    train: tf.data.Dataset
    validation: tf.data.Dataset | None
    num_classes: int
    train_examples: int | None
    steps_per_epoch: int
    shard_policy: str  # "FILE" or "DATA", for the train_start line
    # How train_examples was found: "dataset info", "file names", "counted" (None: not needed).
    examples_from: str | None = None


def _options(policy: tf.data.experimental.AutoShardPolicy) -> tf.data.Options:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return options


def make_inputs(
    cfg: TrainConfig,
    global_batch: int,
    num_workers: int,
    count: Callable[[list[str]], int] = count_records,
) -> Inputs:
    """Build the train and validation pipelines for this replica. `count`
    counts TFRecords when their names do not say how many they hold."""
    multi_worker = num_workers > 1
    if cfg.is_synthetic:
        return _synthetic_inputs(cfg, global_batch)
    if cfg.is_tfrecord:
        return _tfrecord_inputs(cfg, global_batch, num_workers, count)

    train_records, info = tfds_split(cfg, cfg.train_split, shuffle_files=True)
    num_classes = cfg.num_classes or info.features[info.supervised_keys[1]].num_classes
    train_examples = info.splits[cfg.train_split].num_examples
    common: dict[str, Any] = dict(image_size=cfg.image_size, global_batch=global_batch,
                                  shuffle_buffer=cfg.shuffle_buffer, seed=cfg.seed, ordered=multi_worker)
    train = _finish(train_records, training=True, **common)
    validation = None
    if cfg.eval_split:
        eval_records, _ = tfds_split(cfg, cfg.eval_split, shuffle_files=False)
        validation = _finish(eval_records, training=False, **common)
    data_policy = tf.data.experimental.AutoShardPolicy.DATA
    return Inputs(
        train=train.with_options(_options(data_policy)),
        validation=None if validation is None else validation.with_options(_options(data_policy)),
        num_classes=num_classes,
        train_examples=train_examples,
        steps_per_epoch=cfg.steps_per_epoch or steps_per_epoch(train_examples, global_batch),
        shard_policy="DATA",
        examples_from="dataset info",
    )


def check_tfrecord_inputs(cfg: TrainConfig) -> tuple[list[str], list[str]]:
    """The train and eval files, after checking they exist and hold the features the flags name."""
    train_files = tfrecord_files(cfg.train_files, "--train-files")
    eval_files = tfrecord_files(cfg.eval_files, "--eval-files") if cfg.eval_files else []
    check_example_features(train_files, cfg.image_key, cfg.label_key, "--train-files")
    if eval_files:
        check_example_features(eval_files, cfg.image_key, cfg.label_key, "--eval-files")
    return train_files, eval_files


def _tfrecord_inputs(cfg: TrainConfig, global_batch: int, num_workers: int,
                     count: Callable[[list[str]], int]) -> Inputs:
    train_files, eval_files = check_tfrecord_inputs(cfg)

    def policy_for(files: list[str]):
        if len(files) >= num_workers and num_workers > 1:
            return tf.data.experimental.AutoShardPolicy.FILE
        return tf.data.experimental.AutoShardPolicy.DATA

    train_policy = policy_for(train_files)
    # Element order only matters when workers split a shared stream by position.
    ordered = num_workers > 1 and train_policy == tf.data.experimental.AutoShardPolicy.DATA
    records = tfrecord_records(train_files, image_key=cfg.image_key, label_key=cfg.label_key,
                               seed=cfg.seed, shuffle_files=True, ordered=ordered)
    train = _finish(records, training=True, image_size=cfg.image_size, global_batch=global_batch,
                    shuffle_buffer=cfg.shuffle_buffer, seed=cfg.seed, ordered=ordered)
    validation = None
    if eval_files:
        eval_policy = policy_for(eval_files)
        eval_records = tfrecord_records(eval_files, image_key=cfg.image_key, label_key=cfg.label_key,
                                        seed=cfg.seed, shuffle_files=False, ordered=True)
        validation = _finish(eval_records, training=False, image_size=cfg.image_size,
                             global_batch=global_batch, shuffle_buffer=1, seed=cfg.seed, ordered=True)
        validation = validation.with_options(_options(eval_policy))
    # Counting reads every record once; file names that state sizes and
    # --steps-per-epoch both spare it.
    train_examples = sizes_from_names(train_files)
    examples_from: str | None = "file names"
    if train_examples is None:
        train_examples, examples_from = (None, None) if cfg.steps_per_epoch else (count(train_files), "counted")
    steps = cfg.steps_per_epoch
    if not steps:
        assert train_examples is not None      # counted above whenever no --steps-per-epoch was given
        steps = steps_per_epoch(train_examples, global_batch)
    return Inputs(
        train=train.with_options(_options(train_policy)),
        validation=validation,
        num_classes=cfg.num_classes or 0,
        train_examples=train_examples,
        steps_per_epoch=steps,
        shard_policy=train_policy.name,
        examples_from=examples_from,
    )


def _synthetic_inputs(cfg: TrainConfig, global_batch: int) -> Inputs:
    num_classes = cfg.num_classes or SYNTHETIC_CLASSES
    train = (
        synthetic_dataset(cfg.synthetic_examples, num_classes, cfg.image_size, cfg.seed)
        .shuffle(min(cfg.shuffle_buffer, cfg.synthetic_examples), seed=cfg.seed)
        .repeat()
        .batch(global_batch, drop_remainder=True)
        .prefetch(AUTOTUNE)
    )
    validation = None
    if cfg.synthetic_eval_examples:
        validation = (
            synthetic_dataset(cfg.synthetic_eval_examples, num_classes, cfg.image_size, cfg.seed, stream=1)
            .batch(global_batch)
            .prefetch(AUTOTUNE)
        )
    policy = _options(tf.data.experimental.AutoShardPolicy.DATA)
    return Inputs(
        train=train.with_options(policy),
        validation=None if validation is None else validation.with_options(policy),
        num_classes=num_classes,
        train_examples=cfg.synthetic_examples,
        steps_per_epoch=cfg.steps_per_epoch or steps_per_epoch(cfg.synthetic_examples, global_batch),
        shard_policy="DATA",
        examples_from="flags",
    )
