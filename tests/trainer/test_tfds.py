"""The TFDS path on a tiny "cassava" prepared on disk by the real registered builder.

Cassava cannot be downloaded here and tfds.testing.mock_data has no splits for
it, so the test runs the real `tfds.builder("cassava").download_and_prepare`
with only its split generators pointed at a folder of generated JPEGs laid out
like the real archive (<split>/<label>/*.jpg). The builder's own
`_generate_examples`, features and file format do the rest, and the trainer then
reads it with its ordinary `tfds.load("cassava", data_dir=...)` call.
"""

import collections
import importlib.resources
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import trainer  # noqa: F401  (tf-keras before TensorFlow)
from tests.trainer.helpers import of, output_flags, run_trainer
from trainer import data
from trainer.config import parse_args

LABELS = ["cbb", "cbsd", "cgm", "cmd", "healthy"]  # cassava's classes, in its order
SPLITS = {"train": 20, "validation": 10}


@pytest.fixture(scope="module")
def cassava_dir(tmp_path_factory):
    # tensorflow-datasets 4.9.10 imports `importlib_resources` to prepare a
    # dataset but only declares it for Python < 3.9; on 3.11 the standard
    # library module is the same API.
    try:
        import importlib_resources  # noqa: F401
    except ImportError:
        sys.modules["importlib_resources"] = importlib.resources
    import tensorflow_datasets as tfds

    root = tmp_path_factory.mktemp("cassava")
    raw, data_dir = root / "raw", root / "tfds"
    rng = np.random.default_rng(0)
    written = {}
    for split, count in SPLITS.items():
        for i in range(count):
            label = LABELS[i % len(LABELS)]
            folder = raw / split / label
            folder.mkdir(parents=True, exist_ok=True)
            encoded = tf.io.encode_jpeg(rng.integers(0, 255, (36, 44, 3), dtype=np.uint8)).numpy()
            (folder / f"{split}-{label}-{i}.jpg").write_bytes(encoded)
            written[encoded] = (split, LABELS.index(label))

    builder = tfds.builder("cassava", data_dir=str(data_dir))

    def split_generators(dl_manager):
        return [tfds.core.SplitGenerator(name=split, gen_kwargs={"datapath": os.path.join(raw, split)})
                for split in SPLITS]

    builder._split_generators = split_generators
    builder.download_and_prepare()
    return data_dir, written


def test_trainer_reads_the_prepared_examples_through_tfds_load(cassava_dir):
    data_dir, written = cassava_dir
    cfg = parse_args(["--dataset=cassava", f"--data-dir={data_dir}"], environ={})
    for split, count in SPLITS.items():
        records, info = data.tfds_split(cfg, split, shuffle_files=False)
        assert info.name == "cassava" and info.features["label"].num_classes == 5
        assert info.splits[split].num_examples == count
        got = collections.Counter((bytes(x.numpy()), int(y)) for x, y in records)
        want = collections.Counter((enc, label) for enc, (s, label) in written.items() if s == split)
        assert got == want


@pytest.mark.slow
def test_train_on_tfds_cassava(cassava_dir, tmp_path):
    data_dir, _ = cassava_dir
    run = run_trainer(["--dataset=cassava", f"--data-dir={data_dir}", "--model=tiny_cnn", "--image-size=32",
                       "--batch-size=4", "--epochs=2", *output_flags(tmp_path)])
    assert run.returncode == 0, run.explain()
    start = of(run.events, "train_start")[0]
    # 20 training images at a global batch of 4: ceil(20 / 4) = 5 steps per epoch.
    assert start["train_examples"] == 20 and start["steps_per_epoch"] == 5
    ends = of(run.events, "epoch_end")
    assert [e["steps"] for e in ends] == [5, 5]
    assert {"val_loss", "val_accuracy"} <= set(ends[-1]["metrics"])
    model = tf.keras.models.load_model(str(tmp_path / "model"))
    assert model.output_shape == (None, 5)
