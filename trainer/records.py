"""Writing image classification TFRecords in the layout the trainer reads.

Each record is a tf.train.Example with
  image/encoded      bytes  the JPEG (or PNG) file contents
  image/class/label  int64  the class index
(the names of tensorflow/models' image classification data; other names can be
read with --image-key / --label-key). Used by the tests and the benchmark, and
handy for converting a folder of images.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import tensorflow as tf


def example_bytes(encoded_image: bytes, label: int, image_key: str = "image/encoded",
                  label_key: str = "image/class/label") -> bytes:
    features = {
        image_key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded_image])),
        label_key: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_shards(examples: Iterable[tuple[bytes, int]], prefix: str, num_shards: int) -> list[str]:
    """Round-robin the (encoded image, label) pairs into `num_shards` files
    named PREFIX-00000-of-0000N.tfrecord; returns the file names."""
    tf.io.gfile.makedirs(os.path.dirname(prefix) or ".")
    paths = [f"{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    writers = [tf.io.TFRecordWriter(p) for p in paths]
    try:
        for n, (encoded, label) in enumerate(examples):
            writers[n % num_shards].write(example_bytes(encoded, label))
    finally:
        for w in writers:
            w.close()
    return paths
