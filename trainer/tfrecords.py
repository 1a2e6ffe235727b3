"""TFRecord shards: finding them, reading (image, label) Examples, counting records, sizes
from file names (NAME-NN-SIZE.tfrec, Kaggle's and the Docker/TFRecords blog's convention), and
the check of the first record's features before training, which reads the record framing
(length, masked CRC32C) itself so that a wrong file is named before TensorFlow reads it."""

from __future__ import annotations

import os
import re
import struct

import numpy as np
import tensorflow as tf

from trainer.errors import ConfigError
from trainer.images import AUTOTUNE


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
    known = [s for s in sizes if s is not None]
    return sum(known) if sizes and len(known) == len(sizes) else None


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
