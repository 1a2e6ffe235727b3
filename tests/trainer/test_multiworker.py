"""Real two-process MultiWorkerMirroredStrategy jobs on 127.0.0.1 (chief + worker)."""

import numpy as np
import pytest
import tensorflow as tf

import trainer  # noqa: F401  (tf-keras before TensorFlow)
from tests.trainer.helpers import (
    DEMO_ARGS,
    free_port,
    of,
    trainer_env,
    vertex_cluster_spec,
    vertex_tf_config,
    write_jpeg_examples,
)
from trainer.records import write_shards

pytestmark = pytest.mark.slow


def start_chief_and_worker(replicas, tmp_path, args, out_root, placement=None):
    """placement(role, cluster) -> the env that tells a replica its place (default: Vertex's TF_CONFIG)."""
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    placement = placement or (lambda role, cluster: {"TF_CONFIG": vertex_tf_config(cluster, role, 0)})
    # Outputs come from the AIP_* variables, exactly as on Vertex (with their trailing "/").
    aip = {"AIP_MODEL_DIR": f"{out_root}/model/", "AIP_CHECKPOINT_DIR": f"{out_root}/checkpoints/",
           "AIP_TENSORBOARD_LOG_DIR": f"{out_root}/logs/"}
    temps = {}
    procs = {}
    for role in ("chief", "worker"):
        temps[role] = tmp_path / f"tmp-{role}"
        temps[role].mkdir()
        env = trainer_env(TMPDIR=str(temps[role]), **placement(role, cluster), **aip)
        procs[role] = replicas.start(role, args, env)
    runs = {role: replicas.wait(proc) for role, proc in procs.items()}
    return runs, temps


def assert_trained_together(runs, epochs, steps, task="chief:0", other="worker:0"):
    for role, run in runs.items():
        assert run.returncode == 0, f"{role}: {run.explain()}"
    chief = runs["chief"].events
    assert [e["event"] for e in chief] == ["train_start"] + ["epoch_end"] * epochs + ["train_end"]
    assert {e["task"] for e in chief} == {task}
    start = of(chief, "train_start")[0]
    assert start["strategy"] == "MultiWorkerMirroredStrategy"
    assert start["replicas"] == 2 and start["workers"] == 2
    # No GPU here: ring all-reduce (NCCL is chosen only when TensorFlow sees GPUs).
    assert start["all_reduce"] == "RING" and start["gpus"] == 0
    ends = of(chief, "epoch_end")
    assert [e["epoch"] for e in ends] == list(range(1, epochs + 1))
    assert all(e["epochs"] == epochs and e["steps"] == steps for e in ends)
    assert all(e["examples_per_sec"] > 0 for e in ends)
    # Progress comes from the chief alone; the worker's stdout is empty and its
    # stderr says it trained in the same group.
    assert runs["worker"].stdout == ""
    assert f"trainer: {other} training (2 replicas in sync)" in runs["worker"].stderr
    return chief


def assert_saved_by_chief_only(chief, worker_run, temps, out_root):
    model_dir = out_root / "model"
    chief_end = of(chief, "train_end")[0]
    assert chief_end["saved"] is True and chief_end["save_path"] == str(model_dir)
    assert (model_dir / "saved_model.pb").is_file()
    # The worker saved into a temp dir of its own, and that dir is gone.
    finished = [ln for ln in worker_run.stderr.splitlines() if "finished; its copy of the model went to" in ln]
    assert len(finished) == 1 and str(temps["worker"]) in finished[0]
    assert list(temps["worker"].iterdir()) == []
    # No worker leftovers among the job outputs (Keras' "workertemp_N" dirs included).
    leftovers = [p for p in out_root.rglob("*") if "workertemp" in p.name]
    assert leftovers == []
    # TensorBoard logs come from the chief.
    assert list((out_root / "logs").rglob("events.out.tfevents.*"))


def load_and_predict(model_dir, image_size, num_classes):
    model = tf.keras.models.load_model(str(model_dir))
    probs = model.predict(np.random.default_rng(0).uniform(0, 255, (3, image_size, image_size, 3)), verbose=0)
    assert probs.shape == (3, num_classes)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-4)
    return model


def test_demo_job_chief_and_worker(replicas, tmp_path):
    """The service's demo template: synthetic data, tiny CNN, chief + 1 worker."""
    out_root = tmp_path / "job"
    args = [*DEMO_ARGS, "--epochs=2", "--steps-per-epoch=8", "--batch-size=16", "--synthetic-eval-examples=72"]
    runs, temps = start_chief_and_worker(
        replicas, tmp_path, args, out_root,
        placement=lambda role, cluster: {"TF_CONFIG": vertex_tf_config(cluster, role, 0, trial="7")})
    chief = assert_trained_together(runs, epochs=2, steps=8)
    assert of(chief, "train_start")[0]["global_batch_size"] == 32  # 16 per replica x 2
    # A tuning trial: every progress line says which.
    assert {e["trial"] for e in chief} == {"7"}
    assert_saved_by_chief_only(chief, runs["worker"], temps, out_root)
    metrics = of(chief, "epoch_end")[-1]["metrics"]
    assert set(metrics) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert metrics["loss"] < of(chief, "epoch_end")[0]["metrics"]["loss"]  # it learns
    load_and_predict(out_root / "model", 32, 5)


def test_tfrecord_shards_are_split_by_file(replicas, tmp_path):
    """TFRecord input with more shards than workers: FILE auto-sharding."""
    examples = write_jpeg_examples(tf, 48, num_classes=3)
    data_dir = tmp_path / "records"
    write_shards(examples[:36], str(data_dir / "train"), num_shards=4)
    write_shards(examples[36:], str(data_dir / "val"), num_shards=2)
    out_root = tmp_path / "job"
    args = [f"--train-files={data_dir}/train-*", f"--eval-files={data_dir}/val-*", "--num-classes=3",
            "--model=tiny_cnn", "--image-size=32", "--batch-size=4", "--epochs=2"]
    runs, temps = start_chief_and_worker(replicas, tmp_path, args, out_root)
    # 36 examples at a global batch of 8: ceil(36 / 8) = 5 steps.
    chief = assert_trained_together(runs, epochs=2, steps=5)
    start = of(chief, "train_start")[0]
    assert start["shard_policy"] == "FILE" and start["train_examples"] == 36
    # Counted by the chief alone and shared with the worker by an all-reduce:
    # both ran 5 steps per epoch, so the worker got the same count.
    assert start["train_examples_from"] == "counted"
    assert "val_accuracy" in of(chief, "epoch_end")[-1]["metrics"]
    assert_saved_by_chief_only(chief, runs["worker"], temps, out_root)
    load_and_predict(out_root / "model", 32, 3)


def test_cluster_spec_without_tf_config_trains_as_one_cluster(replicas, tmp_path):
    """A launcher that sets only CLUSTER_SPEC: the replicas still form one MWMS
    cluster (not two lone chiefs writing the same model dir)."""
    out_root = tmp_path / "job"

    def cluster_spec_only(role, cluster):
        pools = {"workerpool0": cluster["chief"], "workerpool1": cluster["worker"]}
        pool = "workerpool0" if role == "chief" else "workerpool1"
        return {"CLUSTER_SPEC": vertex_cluster_spec(pools, pool, 0, trial="4")}

    args = [*DEMO_ARGS, "--epochs=1", "--steps-per-epoch=4", "--batch-size=8", "--synthetic-eval-examples=0"]
    runs, temps = start_chief_and_worker(replicas, tmp_path, args, out_root, placement=cluster_spec_only)
    chief = assert_trained_together(runs, epochs=1, steps=4)
    assert {e["trial"] for e in chief} == {"4"}
    assert_saved_by_chief_only(chief, runs["worker"], temps, out_root)
