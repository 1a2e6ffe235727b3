"""Cancel: SIGTERM ends a multi-worker replica at once. TensorFlow's coordination
service would otherwise swallow it (its preemption notifier), and a cancelled job
would only stop at the SIGKILL after the service's grace period."""
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.trainer.helpers import (
    DEMO_ARGS,
    REPO,
    free_port,
    output_flags,
    trainer_env,
    vertex_tf_config,
)

pytestmark = pytest.mark.slow


def test_sigterm_ends_both_replicas_of_a_running_mwms_job(tmp_path):
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    args = [*DEMO_ARGS, "--epochs=200", "--steps-per-epoch=20", "--batch-size=16", *output_flags(tmp_path)]
    procs = {}
    for role in ("chief", "worker"):
        env = trainer_env(TF_CONFIG=vertex_tf_config(cluster, role, 0))
        # stderr to a file: an unread pipe could fill up and block the replica.
        with open(tmp_path / f"{role}.err", "w") as err:
            procs[role] = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=env,
                                           stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        for line in procs["chief"].stdout:  # training is under way once epoch 1 ends
            if line.startswith("{") and json.loads(line).get("event") == "epoch_end":
                break
        for proc in procs.values():
            os.kill(proc.pid, signal.SIGTERM)
        # Without the trainer's own handler both would ignore SIGTERM and this wait times out.
        codes = {role: proc.wait(timeout=60) for role, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert codes == {"chief": 128 + signal.SIGTERM, "worker": 128 + signal.SIGTERM}
    assert "got SIGTERM; exiting" in (tmp_path / "chief.err").read_text()
