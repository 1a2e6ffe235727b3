"""--strategy=parameter_server: the chief coordinates, a worker computes, a ps holds variables."""

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


def test_parameter_server_job(replicas, tmp_path):
    cluster = {role: [f"127.0.0.1:{free_port()}"] for role in ("chief", "worker", "ps")}
    args = [*DEMO_ARGS, "--strategy=parameter_server", "--epochs=2", "--steps-per-epoch=6", "--batch-size=16",
            *output_flags(tmp_path)]
    servers = [replicas.start(role, args, trainer_env(TF_CONFIG=vertex_tf_config(cluster, role, 0)))
               for role in ("ps", "worker")]
    chief = replicas.wait(replicas.start("chief", args, trainer_env(TF_CONFIG=vertex_tf_config(cluster, "chief", 0))))
    assert chief.returncode == 0, chief.explain()
    start = of(chief.events, "train_start")[0]
    assert start["strategy"] == "ParameterServerStrategy" and start["workers"] == 1
    assert [e["epoch"] for e in of(chief.events, "epoch_end")] == [1, 2]
    assert (tmp_path / "model" / "saved_model.pb").is_file()
    # The servers serve until the job is torn down (Vertex ends the job when the chief finishes).
    assert all(proc.poll() is None for proc in servers)
