"""Flags -> TrainConfig, including output directories from Vertex's AIP_* variables."""

import pytest

from tests.trainer.helpers import DEMO_ARGS
from trainer.config import parse_args
from trainer.errors import ConfigError

AIP = {
    "AIP_MODEL_DIR": "gs://bucket/job/model/",
    "AIP_CHECKPOINT_DIR": "gs://bucket/job/checkpoints/",
    "AIP_TENSORBOARD_LOG_DIR": "gs://bucket/job/logs/",
}


def test_output_dirs_default_to_vertex_aip_variables():
    cfg = parse_args([], environ=AIP)
    assert cfg.model_dir == "gs://bucket/job/model"
    assert cfg.checkpoint_dir == "gs://bucket/job/checkpoints"
    assert cfg.tensorboard_dir == "gs://bucket/job/logs"


def test_output_flags_beat_aip_variables():
    cfg = parse_args(["--model-dir=/m", "--checkpoint-dir=/c", "--tensorboard-dir=/t"], environ=AIP)
    assert (cfg.model_dir, cfg.checkpoint_dir, cfg.tensorboard_dir) == ("/m", "/c", "/t")
    only_model = parse_args(["--model-dir=/m"], environ=AIP)
    assert only_model.checkpoint_dir == "gs://bucket/job/checkpoints"


def test_legacy_job_dir_and_local_fallback():
    cfg = parse_args(["--job-dir=gs://b/legacy/"], environ={})
    assert (cfg.model_dir, cfg.checkpoint_dir, cfg.tensorboard_dir) == (
        "gs://b/legacy/model", "gs://b/legacy/checkpoints", "gs://b/legacy/logs")
    local = parse_args([], environ={})
    assert local.model_dir == "trainer-output/model"


def test_demo_template_flags():
    cfg = parse_args([*DEMO_ARGS, "--epochs=2", "--steps-per-epoch=5", "--batch-size=16"], environ={})
    assert cfg.is_synthetic and cfg.model == "tiny_cnn"
    assert (cfg.epochs, cfg.steps_per_epoch, cfg.batch_size, cfg.image_size) == (2, 5, 16, 32)
    assert cfg.weights == "none"  # tiny_cnn has no ImageNet weights
    assert cfg.num_classes == 5 and cfg.strategy == "auto"


def test_defaults_follow_the_seed_article():
    cfg = parse_args([], environ={})
    assert (cfg.dataset, cfg.model, cfg.weights, cfg.batch_size, cfg.image_size) == (
        "cassava", "resnet50", "imagenet", 64, 224)
    assert cfg.is_tfds and cfg.steps_per_epoch is None


def test_all_flags():
    cfg = parse_args([
        "--dataset=tf_flowers", "--data-dir=gs://b/tfds", "--eval-split=train[90%:]", "--model=densenet121",
        "--weights=/w/densenet_notop.h5", "--image-size=160", "--epochs=7", "--steps-per-epoch=11",
        "--batch-size=8", "--learning-rate=3e-4", "--fine-tune-layers=20", "--mixed-precision",
        "--strategy=mwms", "--num-classes=5", "--seed=9",
    ], environ={})
    assert cfg.dataset == "tf_flowers" and cfg.data_dir == "gs://b/tfds" and cfg.eval_split == "train[90%:]"
    assert (cfg.model, cfg.weights, cfg.image_size, cfg.fine_tune_layers) == (
        "densenet121", "/w/densenet_notop.h5", 160, 20)
    assert (cfg.epochs, cfg.steps_per_epoch, cfg.batch_size, cfg.learning_rate) == (7, 11, 8, 3e-4)
    assert cfg.mixed_precision and cfg.strategy == "mwms" and cfg.num_classes == 5 and cfg.seed == 9


def test_train_files_imply_tfrecord_and_split_on_commas():
    cfg = parse_args(["--train-files=/d/a-*.tfrecord,/d/b-*.tfrecord", "--train-files=/d/c.tfrecord",
                      "--eval-files=/d/val-*", "--num-classes=5"], environ={})
    assert cfg.is_tfrecord
    assert cfg.train_files == ("/d/a-*.tfrecord", "/d/b-*.tfrecord", "/d/c.tfrecord")
    assert cfg.eval_files == ("/d/val-*",)


@pytest.mark.parametrize("argv, message", [
    (["--model=vgg16"], "unknown model 'vgg16'"),
    (["--model=tiny_cnn", "--weights=imagenet"], "no ImageNet weights"),
    (["--strategy=tpu"], "invalid choice"),
    (["--train-files=/x/*"], "--num-classes is required"),
    (["--dataset=tfrecord"], "needs --train-files"),
    (["--dataset=synthetic", "--train-files=/x", "--num-classes=3"], "only go with TFRecord"),
    (["--epochs=0"], "--epochs must be at least 1"),
    (["--image-size=16"], "--image-size must be at least 32"),
    (["--steps-per-epoch=0"], "--steps-per-epoch must be at least 1"),
    (["--learning-rate=0"], "must be positive"),
    (["--batch-size=two"], "invalid int value"),
])
def test_bad_flags_are_config_errors(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_args(argv, environ={})


def test_in_the_container_outputs_that_would_be_lost_are_refused():
    inside = {"TRAINJOBS_IN_CONTAINER": "true"}  # as Dockerfile.trainer sets it
    with pytest.raises(ConfigError) as err:
        parse_args([], environ=inside)
    assert "--model-dir, --checkpoint-dir, --tensorboard-dir" in str(err.value)
    assert "lost when it exits" in str(err.value) and "base_output_directory" in str(err.value)
    with pytest.raises(ConfigError, match="no output location for --tensorboard-dir"):
        parse_args(["--model-dir=gs://b/m", "--checkpoint-dir=gs://b/c"], environ=inside)
    # Any real location is fine: Vertex's AIP_* variables, --job-dir, or the flags.
    assert parse_args([], environ={**inside, **AIP}).model_dir == "gs://bucket/job/model"
    assert parse_args(["--job-dir=gs://b/j"], environ=inside).tensorboard_dir == "gs://b/j/logs"
    # Outside the image the local fallback stays (local runs and tests).
    assert parse_args([], environ={}).model_dir == "trainer-output/model"


def test_cluster_timeout_all_reduce_and_nan_check_flags():
    cfg = parse_args([], environ={})
    assert (cfg.cluster_timeout, cfg.all_reduce, cfg.nan_check_steps) == (300, "auto", 50)
    cfg = parse_args(["--cluster-timeout=20", "--all-reduce=nccl", "--nan-check-steps=0"], environ={})
    assert (cfg.cluster_timeout, cfg.all_reduce, cfg.nan_check_steps) == (20, "nccl", 0)
    for argv, message in ((["--cluster-timeout=0"], "must be positive"), (["--all-reduce=auto2"], "invalid choice"),
                          (["--nan-check-steps=-1"], "at least 0")):
        with pytest.raises(ConfigError, match=message):
            parse_args(argv, environ={})
