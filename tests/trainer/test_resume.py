"""Fault tolerance: a two-replica MWMS job whose replicas are SIGKILLed after epoch 1
resumes at epoch 2 (BackupAndRestore) when started again with the same checkpoint dir."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.trainer.helpers import (
    DEMO_ARGS,
    REPO,
    events,
    free_port,
    of,
    output_flags,
    trainer_env,
    vertex_tf_config,
)

pytestmark = pytest.mark.slow


def test_killed_job_resumes_at_the_next_epoch(replicas, tmp_path):
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    # Epochs long enough (30 steps) that the kill lands well inside epoch 2.
    args = [*DEMO_ARGS, "--epochs=3", "--steps-per-epoch=30", "--batch-size=16", *output_flags(tmp_path)]

    def env(role):
        return trainer_env(TF_CONFIG=vertex_tf_config(cluster, role, 0))

    worker = replicas.start("worker-run1", args, env("worker"))
    chief = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=env("chief"),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = []
    try:
        for line in chief.stdout:
            seen.append(line)
            if '"epoch_end"' in line and json.loads(line)["epoch"] == 1:
                # A replica dies (preemption, OOM...); the job is then restarted as a whole.
                os.kill(worker.pid, signal.SIGKILL)
                os.kill(chief.pid, signal.SIGKILL)
                break
        seen.extend(chief.stdout.read().splitlines(keepends=True))
    finally:
        if chief.poll() is None:
            chief.kill()
        chief.wait()
    assert chief.returncode == -signal.SIGKILL
    assert worker.wait() == -signal.SIGKILL
    first = events("".join(seen))
    assert [e["epoch"] for e in of(first, "epoch_end")] == [1], "the kill came too late"
    assert of(first, "train_end") == []
    backup = tmp_path / "checkpoints" / "backup"
    assert any(backup.rglob("*.index")), "no backup to resume from"

    procs = {role: replicas.start(f"{role}-run2", args, env(role)) for role in ("chief", "worker")}
    runs = {role: replicas.wait(proc) for role, proc in procs.items()}
    for role, run in runs.items():
        assert run.returncode == 0, f"{role}: {run.explain()}"
    assert of(runs["chief"].events, "train_start")[0]["initial_epoch"] == 2
    assert [e["epoch"] for e in of(runs["chief"].events, "epoch_end")] == [2, 3]
    ends = of(runs["chief"].events, "epoch_end")
    # Weights were restored, not re-initialised: the resumed epoch starts where
    # epoch 1 left off, so its loss is already below epoch 1's.
    assert ends[0]["metrics"]["loss"] < of(first, "epoch_end")[0]["metrics"]["loss"]
    assert (tmp_path / "model" / "saved_model.pb").is_file()
    # A finished run removes its backup, so the next job starts from epoch 1.
    assert not any(backup.rglob("*.index"))
