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

import math
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from trainer.config import TrainConfig
from trainer.errors import ConfigError

AUTOTUNE = tf.data.AUTOTUNE
# Classes of the synthetic data set when --num-classes is not given.
SYNTHETIC_CLASSES = 5


def global_batch_size(per_replica_batch: int, replicas_in_sync: int) -> int:
    return per_replica_batch * replicas_in_sync


def steps_per_epoch(num_examples: int, global_batch: int) -> int:
    """Steps that cover every example once; the last batch may be short (ceil)."""
    if num_examples < 1 or global_batch < 1:
        raise ValueError(f"need positive sizes, got {num_examples} examples, batch {global_batch}")
    return math.ceil(num_examples / global_batch)


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


# ---------------------------------------------------------------------------
# Decoding and augmentation (shared by TFDS and TFRecord input)


def _crop_window(image_shape: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    # Inception-style random crop, kept gentle (>= 40 % of the area) because
    # disease marks on a leaf can be small.
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        image_shape,
        bounding_boxes=tf.zeros([1, 0, 4]),
        min_object_covered=0.1,
        aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.4, 1.0),
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    return begin, size


def decode_for_training(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """Random crop + flip. JPEGs are decoded only inside the crop window, which
    is the expensive part of the pipeline on CPU."""

    def jpeg() -> tf.Tensor:
        begin, size = _crop_window(tf.image.extract_jpeg_shape(encoded))
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

    def other() -> tf.Tensor:
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        begin, size = _crop_window(tf.shape(image))
        return tf.slice(image, begin, size)

    image = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    image = tf.image.resize(image, [image_size, image_size])
    image = tf.image.random_flip_left_right(image)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def decode_for_eval(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image = tf.image.resize(image, [image_size, image_size])
    return tf.ensure_shape(image, [image_size, image_size, 3])


def _finish(
    records: tf.data.Dataset,
    *,
    training: bool,
    image_size: int,
    global_batch: int,
    shuffle_buffer: int,
    seed: int,
    ordered: bool,
) -> tf.data.Dataset:
    """(encoded image, label) records -> batched, prefetched (image, label)."""
    if training:
        # Shuffle the small encoded records, not decoded images: cheap in memory.
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
        decode = decode_for_training
    else:
        decode = decode_for_eval
    ds = records.map(
        lambda encoded, label: (decode(encoded, image_size), tf.cast(label, tf.int32)),
        num_parallel_calls=AUTOTUNE,
        deterministic=ordered,
    )
    # Training batches are always full (the stream repeats); the validation set
    # keeps its short last batch so every example counts once.
    ds = ds.batch(global_batch, drop_remainder=training)
    return ds.prefetch(AUTOTUNE)


# ---------------------------------------------------------------------------
# Sources


def tfrecord_files(patterns: tuple[str, ...], what: str) -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        matched = sorted(tf.io.gfile.glob(pattern))
        if not matched:
            raise ConfigError(f"{what}: no files match {pattern!r}")
        files.extend(matched)
    return files


def tfrecord_records(
    files: list[str], *, image_key: str, label_key: str, seed: int, shuffle_files: bool, ordered: bool
) -> tf.data.Dataset:
    features = {
        image_key: tf.io.FixedLenFeature([], tf.string),
        label_key: tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record: tf.Tensor):
        example = tf.io.parse_single_example(record, features)
        return example[image_key], example[label_key]

    names = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        # Same seed on every worker: FILE sharding splits this list by position.
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    records = names.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), 8),
        num_parallel_calls=AUTOTUNE,
        deterministic=ordered,
    )
    return records.map(parse, num_parallel_calls=AUTOTUNE, deterministic=ordered)


def count_records(files: list[str]) -> int:
    records = tf.data.TFRecordDataset(files, num_parallel_reads=min(len(files), 16) or None)
    return int(records.reduce(np.int64(0), lambda n, _: n + 1))


# NAME-NN-SIZE.tfrec (flowers00-230.tfrec, train-07-512.tfrec): SIZE records.
_SIZE_IN_NAME = re.compile(r"\d+-(\d+)\.tfrec$")


def size_from_name(path: str) -> int | None:
    match = _SIZE_IN_NAME.search(os.path.basename(path))
    return int(match.group(1)) if match else None


def sizes_from_names(files: list[str]) -> int | None:
    """Total records when every file name states its size, else None."""
    sizes = [size_from_name(f) for f in files]
    return sum(sizes) if sizes and all(s is not None for s in sizes) else None


_KIND_NAMES = {"bytes_list": "bytes", "int64_list": "int64", "float_list": "float"}


def _suggest(kinds: dict[str, str], kind: str, hints: tuple[str, ...]) -> str | None:
    candidates = [k for k, v in kinds.items() if v == kind]
    for hint in hints:
        for key in candidates:
            if hint in key.lower():
                return key
    return candidates[0] if len(candidates) == 1 else None


def first_record(path: str) -> bytes | None:
    """The first record of a TFRecord file, read by hand from its framing
    (uint64 length, uint32 CRC, data, uint32 CRC). tf.data would do it too, but
    it starts TensorFlow's eager runtime, which must not exist yet when the
    check runs: MultiWorkerMirroredStrategy can only configure a fresh one."""
    with tf.io.gfile.GFile(path, "rb") as f:
        header = f.read(12)
        if not header:
            return None
        if len(header) < 12:
            raise ValueError("the file ends inside the first record's header")
        (length,) = struct.unpack("<Q", header[:8])
        if _masked_crc(header[:8]) != struct.unpack("<I", header[8:12])[0]:
            raise ValueError("the first record's length has a bad checksum")
        data = f.read(length)
        if len(data) < length:
            raise ValueError("the file ends inside the first record")
        return data


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def check_example_features(files: list[str], image_key: str, label_key: str, what: str) -> None:
    """Read the first record and refuse, naming the features present, unless it
    holds an encoded image (bytes) under image_key and an int64 label under label_key."""
    first, path = None, files[0]
    for path in files:
        try:
            first = first_record(path)
        except ValueError as exc:
            raise ConfigError(f"{what}: {path} is not a TFRecord file ({exc})") from None
        if first is not None:
            break
    if first is None:
        raise ConfigError(f"{what}: the files hold no records")
    try:
        example = tf.train.Example.FromString(first)
    except Exception:  # protobuf's DecodeError
        raise ConfigError(f"{what}: the records in {path} are not tf.train.Example protos") from None
    kinds = {key: _KIND_NAMES.get(f.WhichOneof("kind"), "empty")
             for key, f in sorted(example.features.feature.items())}
    wrong = []
    if kinds.get(image_key) != "bytes":
        wrong.append(f"the encoded image (bytes) under {image_key!r} (--image-key)")
    if kinds.get(label_key) != "int64":
        wrong.append(f"the class index (int64) under {label_key!r} (--label-key)")
    if not wrong:
        return
    present = ", ".join(f"{k!r}: {v}" for k, v in kinds.items()) or "none"
    hint = ""
    image = _suggest(kinds, "bytes", ("image", "img", "encoded", "jpeg", "png"))
    label = _suggest(kinds, "int64", ("label", "class", "target"))
    if image and label:
        hint = f"; try --image-key={image} --label-key={label}"
    raise ConfigError(f"{what}: the first record of {path} has features {{{present}}}; expected "
                      f"{' and '.join(wrong)}{hint}")


def tfds_split(cfg: TrainConfig, split: str, *, shuffle_files: bool):
    """The real `tfds.load` call: encoded images (we decode, see above) and labels."""
    import tensorflow_datasets as tfds  # only TFDS runs pay for this import

    try:
        return tfds.load(
            cfg.dataset,
            split=split,
            data_dir=cfg.data_dir,
            as_supervised=True,
            with_info=True,
            download=cfg.tfds_download,
            shuffle_files=shuffle_files,
            decoders={"image": tfds.decode.SkipDecoding()},
            read_config=tfds.ReadConfig(shuffle_seed=cfg.seed),
        )
    except tfds.core.registered.DatasetNotFoundError:
        raise ConfigError(f"--dataset={cfg.dataset!r} is not a TFDS dataset (nor synthetic or tfrecord)") from None
    except (AssertionError, ValueError) as exc:  # not prepared, or a bad split name
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = "" if cfg.tfds_download else " (prepare it first, e.g. `tfds build`, or pass --tfds-download)"
        raise ConfigError(
            f"TFDS dataset {cfg.dataset!r} split {split!r} in data_dir {cfg.data_dir or '~/tensorflow_datasets'}: "
            f"{first_line}{hint}"
        ) from None


def _synthetic_colours(num_classes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 255, size=(num_classes, 3)).astype(np.float32)


def synthetic_dataset(
    num_examples: int, num_classes: int, image_size: int, seed: int, stream: int = 0
) -> tf.data.Dataset:
    """Deterministic, learnable images: each class has its own colour (fixed by
    `seed`), each image is half that colour and half noise. `stream` tells
    training (0) and validation (1) examples apart. The same (seed, stream,
    index) always gives the same example, on every worker and every run."""
    colours = tf.constant(_synthetic_colours(num_classes, seed))
    label_seed, noise_seed = 1000 * seed + 2 * stream, 1000 * seed + 2 * stream + 1

    def make(index: tf.Tensor):
        label = tf.random.stateless_uniform([], seed=[label_seed, index], maxval=num_classes, dtype=tf.int32)
        noise = tf.random.stateless_uniform([image_size, image_size, 3], seed=[noise_seed, index], maxval=255.0)
        return 0.5 * colours[label] + 0.5 * noise, label

    return tf.data.Dataset.range(num_examples).map(make, num_parallel_calls=AUTOTUNE)


# ---------------------------------------------------------------------------


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
    common = dict(image_size=cfg.image_size, global_batch=global_batch,
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
    train_examples, examples_from = sizes_from_names(train_files), "file names"
    if train_examples is None:
        train_examples, examples_from = (None, None) if cfg.steps_per_epoch else (count(train_files), "counted")
    return Inputs(
        train=train.with_options(_options(train_policy)),
        validation=validation,
        num_classes=cfg.num_classes or 0,
        train_examples=train_examples,
        steps_per_epoch=cfg.steps_per_epoch or steps_per_epoch(train_examples, global_batch),
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
