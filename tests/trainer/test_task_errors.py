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
