"""The parameter-server and evaluator layouts of the packaged trainer, end to end
through the API on the local backend, inside the job's sandbox (its own network
namespace: the chief, worker, ps and evaluator reach each other on their TF_CONFIG
addresses, 127.0.0.1:2222...). Real TensorFlow, so one run only (SQLite)."""
from __future__ import annotations

import os

import pytest

from tests.backends.localkit import (
    Api,
    assert_no_processes,
    kill_all,
    read_json,
    run_path,
    settings_for,
)
from tests.conftest import make_token

pytestmark = pytest.mark.slow

ARGS = ["--dataset=synthetic", "--model=tiny_cnn", "--image-size=32", "--epochs=2", "--steps-per-epoch=6",
        "--batch-size=16"]


@pytest.fixture
def sqlite_url(sqlite_template_db, tmp_path) -> str:
    db = tmp_path / "trainjobs.db"
    db.write_bytes(sqlite_template_db.read_bytes())
    return f"sqlite:///{db}"


def test_parameter_server_and_evaluator_train_to_succeeded_in_the_sandbox(api_client, sqlite_url, tmp_path):
    work_dir = tmp_path / "runs"
    token = make_token(sqlite_url, "alpha", "admin")
    spec = {"distribution": "parameter_server",
            "container": {"image_uri": "trainjobs-trainer:latest", "command": ["python", "-m", "trainer.task"],
                          "args": [*ARGS, "--strategy=parameter_server"]},
            "chief": {}, "workers": {"replica_count": 1}, "parameter_servers": {"replica_count": 1},
            "evaluator": {}}
    try:
        with api_client(settings_for(sqlite_url, work_dir), token) as client:
            api = Api(client)
            r = client.post("/v1/templates", json={"name": "ps-eval", "spec": spec})
            assert r.status_code == 201, r.text
            job = api.submit("ps-eval")
            done = api.wait_state(job["id"], "SUCCEEDED", "FAILED", timeout=600)
            assert done["state"] == "SUCCEEDED", done["error"]
            run = run_path(done)
            assert (run / "output" / "model" / "saved_model.pb").is_file()
            state = read_json(run / "state.json")
            if os.geteuid() == 0:
                assert state["holder"] is not None  # it ran sandboxed
                assert {r["address"].rsplit(":", 1)[0] for r in state["replicas"].values()} == {"127.0.0.1"}
            assert len(state["replicas"]) == 4
            assert done["progress"]["phase"] == "finished"
            assert done["progress"].get("evaluation"), done["progress"]  # the evaluator reported
            assert_no_processes(work_dir)
    finally:
        kill_all(work_dir)
