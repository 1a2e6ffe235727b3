"""Preemption and cancel: SIGTERM makes every replica of a running MWMS job save its state at
the same step and exit 143 promptly (TensorFlow's coordination service would otherwise swallow
the signal, and the job would only stop at the SIGKILL after the service's grace period); the
next attempt goes on from that step, not from the last epoch (trainer/preemption.py)."""
import json
import os
import re
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

STEPS = 150


def test_sigterm_saves_every_replica_at_one_step_and_the_next_attempt_goes_on_from_it(replicas, tmp_path):
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    args = [*DEMO_ARGS, "--epochs=2", f"--steps-per-epoch={STEPS}", "--batch-size=16", "--preemption-check-steps=3",
            *output_flags(tmp_path)]

    def env(role):
        return trainer_env(TF_CONFIG=vertex_tf_config(cluster, role, 0))

    procs = {}
    for role in ("chief", "worker"):
        # stderr to a file: an unread pipe could fill up and block the replica.
        with open(tmp_path / f"{role}.err", "w") as err:
            procs[role] = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=env(role),
                                           stdout=subprocess.PIPE, stderr=err, text=True)
    seen = []
    try:
        for line in procs["chief"].stdout:  # training is under way once epoch 1 ends
            seen.append(line)
            if line.startswith("{") and json.loads(line).get("event") == "epoch_end":
                break
        # Only the worker gets the notice (a VM preempted): the chief must save at the same step.
        os.kill(procs["worker"].pid, signal.SIGTERM)
        codes = {role: proc.wait(timeout=90) for role, proc in procs.items()}
        seen.extend(procs["chief"].stdout.read().splitlines(keepends=True))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert codes == {"chief": 128 + signal.SIGTERM, "worker": 128 + signal.SIGTERM}
    first = events("".join(seen))
    [saved] = of(first, "preempted")
    assert saved["epoch"] == 2 and 0 < saved["step"] < STEPS and saved["step"] % 3 == 0, saved
    assert saved["global_step"] == STEPS + saved["step"]
    assert "got SIGTERM; saving a checkpoint" in (tmp_path / "worker.err").read_text()
    assert of(first, "train_end") == []

    again = {role: replicas.start(f"{role}-run2", args, env(role)) for role in ("chief", "worker")}
    runs = {role: replicas.wait(proc) for role, proc in again.items()}
    for role, run in runs.items():
        assert run.returncode == 0, f"{role}: {run.explain()}"
    start = of(runs["chief"].events, "train_start")[0]
    assert (start["initial_epoch"], start["initial_step"]) == (2, saved["step"])
    assert [e["epoch"] for e in of(runs["chief"].events, "epoch_end")] == [2]
    assert (tmp_path / "model" / "saved_model.pb").is_file()


def test_a_replica_that_cannot_save_still_exits(replicas, tmp_path):
    """The worker is SIGKILLed, then the chief gets SIGTERM: its all-reduce never returns, and the
    watchdog ends it after --preemption-save-seconds."""
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    args = [*DEMO_ARGS, "--epochs=50", "--steps-per-epoch=50", "--batch-size=16", "--preemption-save-seconds=3",
            *output_flags(tmp_path)]
    worker = replicas.start("worker", args, trainer_env(TF_CONFIG=vertex_tf_config(cluster, "worker", 0)))
    chief = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO,
                             env=trainer_env(TF_CONFIG=vertex_tf_config(cluster, "chief", 0)),
                             stdout=subprocess.PIPE, stderr=open(tmp_path / "chief.err", "w"), text=True)
    try:
        for line in chief.stdout:
            if '"epoch_end"' in line:
                break
        os.kill(worker.pid, signal.SIGKILL)
        os.kill(chief.pid, signal.SIGTERM)
        assert chief.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if chief.poll() is None:
            chief.kill()
            chief.wait()
    # The watchdog (the all-reduce hangs) or the failed collective (the peer's death is seen
    # first) ends it: either way it says it could not save, and exits as stopped, not failed.
    assert re.search(r"could not save (within 3 s of|after) SIGTERM", (tmp_path / "chief.err").read_text())


def test_an_epoch_resumed_mid_way_reports_the_steps_it_ran(replicas, tmp_path):
    """Issue 47.6: the epoch an attempt resumes at step S runs STEPS - S steps; its epoch_end said
    `steps: STEPS` and divided STEPS batches by the time of the fewer that ran (examples/s 2.2-2.8
    times too high). One replica, no validation (so examples/s is steps x batch / seconds)."""
    args = [*DEMO_ARGS, "--epochs=2", f"--steps-per-epoch={STEPS}", "--batch-size=16", "--preemption-check-steps=3",
            "--synthetic-eval-examples=0", *output_flags(tmp_path)]
    with open(tmp_path / "first.err", "w") as err:
        first_run = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=trainer_env(),
                                     stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        for line in first_run.stdout:   # train_start goes out as epoch 1 begins: stop it inside epoch 1
            if line.startswith("{") and json.loads(line).get("event") == "train_start":
                break
        os.kill(first_run.pid, signal.SIGTERM)
        assert first_run.wait(timeout=90) == 128 + signal.SIGTERM
        [saved] = of(events(first_run.stdout.read()), "preempted")
    finally:
        if first_run.poll() is None:
            first_run.kill()
            first_run.wait()
    assert saved["epoch"] == 1 and 0 < saved["step"] < STEPS, saved

    run = replicas.wait(replicas.start("again", args, trainer_env()))
    assert run.returncode == 0, run.explain()
    assert of(run.events, "train_start")[0]["initial_step"] == saved["step"]
    resumed, whole = of(run.events, "epoch_end")
    assert (resumed["epoch"], resumed["steps"]) == (1, STEPS - saved["step"]), resumed
    assert (whole["epoch"], whole["steps"]) == (2, STEPS), whole
    for end in (resumed, whole):
        assert end["examples_per_sec"] == pytest.approx(end["steps"] * 16 / end["seconds"], rel=0.02), end
