"""Input pipelines and batch arithmetic, with real tf.data on files the tests write."""

import collections

import numpy as np
import pytest
import tensorflow as tf

import trainer  # noqa: F401  (tf-keras before TensorFlow)
from tests.trainer.helpers import write_jpeg_examples
from trainer import data
from trainer.config import parse_args
from trainer.errors import ConfigError
from trainer.records import write_shards

CASSAVA_TRAIN_IMAGES = 5656


def test_steps_per_epoch_match_the_seed_article():
    # One T4, batch 64: 89 steps per epoch.
    assert data.steps_per_epoch(CASSAVA_TRAIN_IMAGES, data.global_batch_size(64, 1)) == 89
    # Two replicas x 64 = a global batch of 128: 45 steps.
    assert data.global_batch_size(64, 2) == 128
    assert data.steps_per_epoch(CASSAVA_TRAIN_IMAGES, data.global_batch_size(64, 2)) == 45
    assert data.steps_per_epoch(128, 64) == 2  # exact multiples do not round up
    with pytest.raises(ValueError):
        data.steps_per_epoch(0, 64)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    examples = write_jpeg_examples(tf, 30, num_classes=3)
    train = write_shards(examples, str(root / "train"), num_shards=3)
    val = write_shards(examples[:10], str(root / "val"), num_shards=2)
    return root, train, val, examples


def tfrecord_cfg(root, *extra):
    return parse_args([f"--train-files={root}/train-*", f"--eval-files={root}/val-*", "--num-classes=3",
                       "--image-size=32", *extra], environ={})


def test_tfrecord_pipeline_decodes_augments_and_batches(shards):
    root, _, _, examples = shards
    inputs = data.make_inputs(tfrecord_cfg(root), global_batch=4, num_workers=1)
    assert inputs.train_examples == 30
    assert inputs.steps_per_epoch == 8  # ceil(30 / 4)
    assert inputs.num_classes == 3
    images, labels = next(iter(inputs.train))
    assert images.shape == (4, 32, 32, 3) and images.dtype == tf.float32
    assert labels.dtype == tf.int32
    assert 0.0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 255.0
    # The training stream repeats: more batches than one pass holds.
    assert sum(1 for _ in inputs.train.take(20)) == 20
    # Validation: every example exactly once, the last batch short (10 = 4 + 4 + 2).
    sizes, seen = [], collections.Counter()
    for images, labels in inputs.validation:
        sizes.append(int(images.shape[0]))
        seen.update(labels.numpy().tolist())
    assert sizes == [4, 4, 2]
    assert seen == collections.Counter(label for _, label in examples[:10])


def test_shard_policy_file_for_many_shards_data_otherwise(shards):
    root = shards[0]
    assert data.make_inputs(tfrecord_cfg(root), 4, num_workers=1).shard_policy == "DATA"
    two = data.make_inputs(tfrecord_cfg(root), 4, num_workers=2)
    assert two.shard_policy == "FILE"
    policy = two.train.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.FILE
    # Fewer files than workers: FILE sharding would starve a worker.
    assert data.make_inputs(tfrecord_cfg(root), 4, num_workers=4).shard_policy == "DATA"


def test_steps_per_epoch_flag_skips_counting(shards):
    inputs = data.make_inputs(tfrecord_cfg(shards[0], "--steps-per-epoch=3"), 4, num_workers=1)
    assert inputs.steps_per_epoch == 3 and inputs.train_examples is None


def test_missing_tfrecord_files_are_a_config_error(tmp_path):
    cfg = parse_args([f"--train-files={tmp_path}/nothing-*", "--num-classes=3"], environ={})
    with pytest.raises(ConfigError, match="no files match"):
        data.make_inputs(cfg, 4, num_workers=1)


def test_decoding_handles_png_as_well_as_jpeg():
    pixels = np.random.default_rng(1).integers(0, 255, (20, 30, 3), dtype=np.uint8)
    for encoded in (tf.io.encode_png(pixels), tf.io.encode_jpeg(pixels)):
        assert data.decode_for_training(encoded, 24).shape == (24, 24, 3)
        assert data.decode_for_eval(encoded, 24).shape == (24, 24, 3)


def test_synthetic_data_is_deterministic_and_separates_train_from_validation():
    cfg = parse_args(["--dataset=synthetic", "--image-size=32", "--synthetic-examples=64",
                      "--synthetic-eval-examples=16"], environ={})
    a = data.make_inputs(cfg, 8, num_workers=1)
    b = data.make_inputs(cfg, 8, num_workers=1)
    (xa, ya), (xb, yb) = next(iter(a.train)), next(iter(b.train))
    np.testing.assert_array_equal(xa.numpy(), xb.numpy())
    np.testing.assert_array_equal(ya.numpy(), yb.numpy())
    assert a.steps_per_epoch == 8 and a.num_classes == 5
    train_images = np.concatenate([x.numpy() for x, _ in a.train.take(8)])
    val_images = np.concatenate([x.numpy() for x, _ in a.validation])
    assert val_images.shape == (16, 32, 32, 3)
    # No validation image is a training image.
    assert not any(np.array_equal(v, t) for v in val_images for t in train_images)
    # Learnable: an image is half its class colour, half noise of mean 127.5,
    # so its mean pixel points back at the class colour.
    colours = data._synthetic_colours(5, cfg.seed)
    estimated = 2 * val_images.mean(axis=(1, 2)) - 127.5
    labels = np.concatenate([y.numpy() for _, y in a.validation])
    nearest = np.argmin(((estimated[:, None, :] - colours[None]) ** 2).sum(-1), axis=1)
    assert (nearest == labels).mean() > 0.9


# --- checking records before training; sizes from file names ----------------------------

from trainer.records import example_bytes  # noqa: E402


def test_sizes_come_from_names_that_follow_the_tfrec_convention():
    assert data.size_from_name("gs://b/flowers00-230.tfrec") == 230
    assert data.size_from_name("/d/train-07-512.tfrec") == 512
    # Our own shards name their position, not their size.
    assert data.size_from_name("/d/train-00000-of-00004.tfrecord") is None
    assert data.sizes_from_names(["/d/a00-10.tfrec", "/d/a01-7.tfrec"]) == 17
    assert data.sizes_from_names(["/d/a00-10.tfrec", "/d/other.tfrec"]) is None


def write_records(path, examples, **keys):
    with tf.io.TFRecordWriter(str(path)) as w:
        for encoded, label in examples:
            w.write(example_bytes(encoded, label, **keys))
    return str(path)


def test_first_record_check_names_the_features_present(tmp_path, shards):
    examples = shards[3][:3]
    ok = [str(p) for p in shards[1]]
    data.check_example_features(ok, "image/encoded", "image/class/label", "--train-files")

    blog = write_records(tmp_path / "f00-3.tfrec", examples, image_key="image", label_key="class")
    with pytest.raises(ConfigError) as err:
        data.check_example_features([blog], "image/encoded", "image/class/label", "--train-files")
    assert "{'class': int64, 'image': bytes}" in str(err.value)
    assert "'image/encoded' (--image-key)" in str(err.value) and "--image-key=image --label-key=class" in str(err.value)
    data.check_example_features([blog], "image", "class", "--train-files")

    float_label = tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"])),
        "label": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0]))})).SerializeToString()
    path = tmp_path / "float.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        w.write(float_label)
    with pytest.raises(ConfigError, match=r"'label': float.*class index \(int64\) under 'label'"):
        data.check_example_features([str(path)], "image", "label", "--train-files")

    not_records = tmp_path / "notes.txt"
    not_records.write_text("these are not TFRecords, just some text long enough to be read as a header\n" * 4)
    with pytest.raises(ConfigError, match="is not a TFRecord file"):
        data.check_example_features([str(not_records)], "image", "label", "--train-files")


def test_blog_layout_reads_with_flags_and_counts_from_names(tmp_path, shards):
    examples = shards[3]
    [write_records(tmp_path / f"flowers{i:02d}-{n}.tfrec", part, image_key="image", label_key="class")
             for i, (n, part) in enumerate(((12, examples[:12]), (18, examples[12:])))]
    cfg = parse_args([f"--train-files={tmp_path}/flowers*.tfrec", "--image-key=image", "--label-key=class",
                      "--num-classes=3", "--image-size=32"], environ={})

    def must_not_count(files):
        raise AssertionError("the file names say how many records there are")

    inputs = data.make_inputs(cfg, 4, num_workers=1, count=must_not_count)
    assert (inputs.train_examples, inputs.examples_from, inputs.steps_per_epoch) == (30, "file names", 8)
    images, labels = next(iter(inputs.train))
    assert images.shape == (4, 32, 32, 3) and set(labels.numpy()) <= {0, 1, 2}
