"""Fault tolerance: a replica SIGKILLed after epoch 1 resumes at epoch 2 from BackupAndRestore."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.trainer.helpers import DEMO_ARGS, REPO, events, of, output_flags, run_trainer, trainer_env

pytestmark = pytest.mark.slow


def test_killed_run_resumes_at_the_next_epoch(tmp_path):
    # Epochs long enough (40 steps) that the kill lands well inside epoch 2.
    args = [*DEMO_ARGS, "--epochs=4", "--steps-per-epoch=40", "--batch-size=32", *output_flags(tmp_path)]
    proc = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=trainer_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if '"epoch_end"' in line and json.loads(line)["epoch"] == 1:
                os.kill(proc.pid, signal.SIGKILL)
                break
        seen.extend(proc.stdout.read().splitlines(keepends=True))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    first = events("".join(seen))
    assert proc.returncode == -signal.SIGKILL
    assert [e["epoch"] for e in of(first, "epoch_end")] == [1], "the kill came too late"
    assert of(first, "train_end") == []
    backup = tmp_path / "checkpoints" / "backup"
    assert any(backup.rglob("*.index")), "no backup to resume from"

    rerun = run_trainer(args)
    assert rerun.returncode == 0, rerun.explain()
    second = rerun.events
    assert of(second, "train_start")[0]["initial_epoch"] == 2
    ends = of(second, "epoch_end")
    assert [e["epoch"] for e in ends] == [2, 3, 4]
    # Weights were restored, not re-initialised: the resumed epoch starts from
    # where epoch 1 left off, so its loss is already below epoch 1's.
    assert ends[0]["metrics"]["loss"] < of(first, "epoch_end")[0]["metrics"]["loss"]
    assert of(second, "train_end")[0]["saved"] is True
    assert (tmp_path / "model" / "saved_model.pb").is_file()
    # A finished run removes its backup, so the next job starts from epoch 1.
    assert not any(backup.rglob("*.index"))
