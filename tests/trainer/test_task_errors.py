"""Bad configuration: exit code 2 and one clear line on stderr, nothing trained."""

import json

from tests.trainer.helpers import DEMO_ARGS, of, output_flags, run_trainer, trainer_env


def assert_config_error(run, fragment):
    assert run.returncode == 2, run.explain()
    errors = [line for line in run.stderr.splitlines() if line.startswith("trainer: error:")]
    assert len(errors) == 1, run.explain()
    assert fragment in errors[0]
    assert run.stderr.rstrip().splitlines()[-1] == errors[0]
    assert of(run.events, "train_start") == []
    return errors[0]


def test_ps_replica_is_refused_before_tensorflow_starts(tmp_path):
    cluster = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]}
    env = trainer_env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "ps", "index": 0},
                                            "environment": "cloud", "job": {}}))
    run = run_trainer([*DEMO_ARGS, *output_flags(tmp_path)], env)
    assert_config_error(run, "--strategy=parameter_server")
    # Refused before the TensorFlow import: that one line is all there is.
    assert len(run.stderr.strip().splitlines()) == 1


def test_unknown_model(tmp_path):
    run = run_trainer(["--dataset=synthetic", "--model=vgg16", *output_flags(tmp_path)])
    assert_config_error(run, "unknown model 'vgg16'")
    assert len(run.stderr.strip().splitlines()) == 1


def test_malformed_tf_config(tmp_path):
    run = run_trainer([*DEMO_ARGS, *output_flags(tmp_path)], trainer_env(TF_CONFIG="{cluster:"))
    assert_config_error(run, "TF_CONFIG is not valid JSON")


def test_missing_tfrecord_files(tmp_path):
    run = run_trainer([f"--train-files={tmp_path}/train-*.tfrecord", "--num-classes=5", "--model=tiny_cnn",
                       "--image-size=32", *output_flags(tmp_path)])
    assert_config_error(run, "no files match")
    assert not (tmp_path / "model").exists()


def test_unprepared_tfds_dataset(tmp_path):
    run = run_trainer(["--dataset=cassava", f"--data-dir={tmp_path / 'tfds'}", "--model=tiny_cnn",
                       "--image-size=32", *output_flags(tmp_path)])
    line = assert_config_error(run, "TFDS dataset 'cassava'")
    assert "--tfds-download" in line


def test_unwritable_model_dir_fails_before_training(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the model dir's parent should be")
    run = run_trainer([*DEMO_ARGS, f"--model-dir={blocker}/model", f"--checkpoint-dir={tmp_path}/ckpt",
                       f"--tensorboard-dir={tmp_path}/logs"])
    line = assert_config_error(run, f"cannot write to --model-dir {blocker}/model")
    assert "checked before training" in line


def test_tfrecords_with_other_feature_names_fail_early_naming_the_features(tmp_path):
    import tensorflow as tf

    import trainer  # noqa: F401
    from tests.trainer.helpers import write_jpeg_examples
    from trainer.records import example_bytes

    path = tmp_path / "flowers00-4.tfrec"
    with tf.io.TFRecordWriter(str(path)) as w:
        for encoded, label in write_jpeg_examples(tf, 4, num_classes=2):
            w.write(example_bytes(encoded, label, image_key="image", label_key="class"))
    run = run_trainer([f"--train-files={path}", "--num-classes=2", "--model=tiny_cnn", "--image-size=32",
                       *output_flags(tmp_path)])
    line = assert_config_error(run, "the first record of")
    assert "{'class': int64, 'image': bytes}" in line
    assert "--image-key=image --label-key=class" in line


def test_loss_that_becomes_nan_stops_with_exit_3_and_nothing_saved(tmp_path):
    # A learning rate of 1e30 sends the weights to infinity within a couple of steps.
    run = run_trainer([*DEMO_ARGS, "--epochs=3", "--steps-per-epoch=8", "--batch-size=8", "--learning-rate=1e30",
                       "--nan-check-steps=2", *output_flags(tmp_path)])
    assert run.returncode == 3, run.explain()
    error = run.stderr.rstrip().splitlines()[-1]
    assert error.startswith("trainer: error: training diverged: the loss is nan at epoch 1, step ")
    assert of(run.events, "epoch_end") == [] and of(run.events, "train_end") == []
    assert not (tmp_path / "model" / "saved_model.pb").exists()
    assert not list((tmp_path / "checkpoints").rglob("ckpt-*"))  # no checkpoint of diverged weights


def test_stdout_carries_only_progress_lines(tmp_path):
    """Keras prints "Downloading data from ..." to stdout; the trainer sends it to
    stderr. (The download fails here: no internet, which is also worth a clear error.)"""
    run = run_trainer(["--dataset=synthetic", "--model=mobilenet_v3_small", "--weights=imagenet",
                       "--image-size=32", *output_flags(tmp_path)])
    assert "Downloading data from" in run.stderr
    assert run.stdout == ""
    assert_config_error(run, "cannot download the ImageNet weights of mobilenet_v3_small")
