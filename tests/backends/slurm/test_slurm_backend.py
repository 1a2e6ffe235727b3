"""The slurm backend against a real cluster (munged, slurmctld, two slurmd nodes):
submit, the tasks' environment, logs through the API, and how jobs end."""
from __future__ import annotations

import json
import os
from pathlib import Path

from tests.backends.slurm.conftest import spec


def _dump_dir(tmp_path: Path) -> Path:
    d = tmp_path / "env"
    d.mkdir()
    os.chmod(d, 0o777)   # the tasks run as the unprivileged job user
    return d


def test_two_roles_run_on_two_nodes_to_succeeded(make_slurm_client, cluster, tmp_path, slurm_work_dir):
    api = make_slurm_client()
    dump = _dump_dir(tmp_path)
    go = dump / "go"
    api.template("two", spec(["--dump-env", str(dump), "--lines", "3", "--wait-file", str(go)],
                             workers=["--dump-env", str(dump), "--lines", "2", "--wait-file", str(go)]))
    job = api.submit("two")
    running = api.wait_state(job["id"], "RUNNING", "FAILED")
    assert running["state"] == "RUNNING", running["error"]
    go.touch()
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    slurm_id = done["backend_ref"]
    assert slurm_id.isdigit()

    # One heterogeneous job, one component per role, each on a node of its own.
    chief, worker = (json.loads((dump / f"{n}.json").read_text()) for n in ("chief-0", "worker-0"))
    assert {chief["TRAINJOBS_SLURM_NODE"], worker["TRAINJOBS_SLURM_NODE"]} == {"n1", "n2"}
    tf = json.loads(chief["TF_CONFIG"])
    assert tf["task"] == {"type": "chief", "index": 0}
    hosts = {a.split(":")[0] for a in tf["cluster"]["chief"] + tf["cluster"]["worker"]}
    assert hosts == {"n1", "n2"}
    assert json.loads(worker["TF_CONFIG"])["cluster"] == tf["cluster"]
    assert json.loads(chief["CLUSTER_SPEC"])["cluster"]["workerpool1"] == tf["cluster"]["worker"]
    run = slurm_work_dir / job["id"]
    assert chief["AIP_MODEL_DIR"] == f"{run}/output/model/"
    assert chief["AIP_CHECKPOINT_DIR"] == f"{run}/output/checkpoints/"
    # Nothing of the service's environment reaches a task.
    assert not any(k.startswith("TRAINJOBS_") and not k.startswith("TRAINJOBS_SLURM_") for k in chief)
    assert "SLURM_CONF" not in chief

    # Logs of both replicas through the logs API.
    lines = api.all_logs(job["id"])
    by = {}
    for line in lines:
        by.setdefault(line["replica"], []).append(line["message"])
    assert by["workerpool0-0"][0].startswith("hello from chief-0 on n")
    assert by["workerpool1-0"][0].startswith("hello from worker-0 on n")
    assert len(by["workerpool0-0"]) == 3 and len(by["workerpool1-0"]) == 2
    # ...and tasks ran as the job user, never root.
    assert "as uid 0" not in " ".join(m for ms in by.values() for m in ms)

    # The job view: the Slurm job id, and each task's real node and port.
    view = api.job(job["id"])
    envs = {r["task_name"]: r["env"] for r in view["cluster"]}
    assert envs["workerpool0-0"]["TRAINJOBS_SLURM_JOB_ID"] == slurm_id
    assert json.loads(envs["workerpool0-0"]["TF_CONFIG"])["cluster"] == tf["cluster"]
    events = [e["to_state"] for e in api.events(job["id"])]
    assert events == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]
