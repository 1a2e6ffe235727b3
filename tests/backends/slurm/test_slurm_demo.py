"""The demo on Slurm, unchanged: mwms-demo (a chief and a worker, the packaged trainer,
MultiWorkerMirroredStrategy) as one heterogeneous job over the two nodes, with real
TensorFlow. One run only (SQLite): the CPU is shared."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.demo import demo_template

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_mwms_demo_trains_on_two_nodes(make_slurm_client, cluster, slurm_work_dir):
    api = make_slurm_client()
    r = api.c.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True))
    assert r.status_code == 201, r.text
    job = api.submit("mwms-demo")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED", timeout=600)
    assert done["state"] == "SUCCEEDED", done["error"]

    model = slurm_work_dir / job["id"] / "output" / "model"
    assert (model / "saved_model.pb").is_file()
    progress = done["progress"]
    assert progress["epoch"] == progress["epochs"] == 2 and progress["phase"] == "finished"
    assert progress["task"] == "chief:0" and Path(progress["model_dir"]).resolve() == model.resolve()

    # The cluster TensorFlow formed: one task on each node, on the ports they published.
    envs = {r["task_name"]: r["env"] for r in api.job(job["id"])["cluster"]}
    tf = json.loads(envs["workerpool0-0"]["TF_CONFIG"])
    assert {a.split(":")[0] for a in tf["cluster"]["chief"] + tf["cluster"]["worker"]} == {"n1", "n2"}

    lines = api.all_logs(job["id"])
    assert any('"event": "epoch_end"' in ln["message"] for ln in lines if ln["replica"] == "workerpool0-0")
    assert any(ln["replica"] == "workerpool1-0" for ln in lines)
