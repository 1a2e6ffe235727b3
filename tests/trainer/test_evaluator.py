"""Sidecar evaluation: an `evaluator` replica evaluates the chief's checkpoints and exits when training is done."""

import pytest

from tests.trainer.helpers import (
    DEMO_ARGS,
    free_port,
    of,
    output_flags,
    trainer_env,
    vertex_tf_config,
)

pytestmark = pytest.mark.slow


def test_evaluator_follows_the_chief_and_exits_when_training_is_done(replicas, tmp_path):
    cluster = {"chief": [f"127.0.0.1:{free_port()}"]}  # Vertex leaves the evaluator out of "cluster"
    args = [*DEMO_ARGS, "--epochs=3", "--steps-per-epoch=15", "--batch-size=16", *output_flags(tmp_path)]
    # The evaluator starts first and waits for checkpoints to appear.
    evaluator = replicas.start("evaluator", args, trainer_env(
        TF_CONFIG=vertex_tf_config(cluster, "evaluator", 0, evaluator=True)))
    # The job spec shows the evaluator pool, so the chief writes per-epoch checkpoints for it.
    chief = replicas.start("chief", args, trainer_env(TF_CONFIG=vertex_tf_config(cluster, "chief", 0, evaluator=True)))
    chief_run = replicas.wait(chief)
    assert chief_run.returncode == 0, chief_run.explain()
    eval_run = replicas.wait(evaluator, timeout=120)
    assert eval_run.returncode == 0, eval_run.explain()

    evaluations = of(eval_run.events, "evaluation")
    epochs = [e["epoch"] for e in evaluations]
    assert epochs and epochs == sorted(set(epochs)) and epochs[-1] == 3
    assert {e["task"] for e in eval_run.events} == {"evaluator:0"}
    assert of(eval_run.events, "train_end")[0]["evaluated_epochs"] == epochs
    assert of(eval_run.events, "epoch_end") == []  # it never trains

    # It evaluated the chief's final weights on the same validation data the
    # chief validated on at the end of epoch 3, so the figures agree.
    final = of(chief_run.events, "epoch_end")[-1]["metrics"]
    assert evaluations[-1]["metrics"]["accuracy"] == pytest.approx(final["val_accuracy"], abs=1e-6)
    assert evaluations[-1]["metrics"]["loss"] == pytest.approx(final["val_loss"], rel=1e-4)
    assert list((tmp_path / "logs" / "evaluator").glob("events.out.tfevents.*"))
    # The chief kept only the newest per-epoch checkpoints (default 2).
    kept = sorted(p.name for p in (tmp_path / "checkpoints" / "epochs").glob("ckpt-*.index"))
    assert kept == ["ckpt-0002.index", "ckpt-0003.index"]
