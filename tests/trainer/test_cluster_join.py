"""A replica whose peers never start gives up after --cluster-timeout, naming them.

Without the trainer's own rendezvous, TensorFlow waits an hour inside the
MultiWorkerMirroredStrategy constructor and logs nothing meanwhile."""

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


def test_chief_without_worker_and_worker_without_chief_exit_naming_the_missing_task(replicas, tmp_path):
    args = [*DEMO_ARGS, "--epochs=1", "--steps-per-epoch=2", "--cluster-timeout=6"]
    alone = {}
    for role in ("chief", "worker"):  # two separate clusters, each missing the other role
        cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
        missing = "worker" if role == "chief" else "chief"
        env = trainer_env(TF_CONFIG=vertex_tf_config(cluster, role, 0))
        proc = replicas.start(role, [*args, *output_flags(tmp_path / role)], env)
        alone[role] = (proc, f"{missing}:0 at {cluster[missing][0]}")
    for role, (proc, missing) in alone.items():
        run = replicas.wait(proc, timeout=120)
        assert run.returncode == 3, run.explain()
        lines = run.stderr.rstrip().splitlines()
        assert lines[-1].startswith(f"trainer: error: the cluster did not form within 6 s (--cluster-timeout): "
                                    f"{role}:0 never saw 1 of 1 task(s): {missing} (connection refused)")
        # Meanwhile it said whom it was waiting for (every timeout/3 = 2 s here, 30 s by default).
        waiting = [ln for ln in lines if f"trainer: {role}:0 waiting for 1 of 1 task(s) to start" in ln]
        assert waiting and all(missing in ln for ln in waiting)
        assert of(run.events, "train_start") == []
