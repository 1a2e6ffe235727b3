"""Sweep trials on the vertex backend: the real JobServiceClient against the fake JobService.
Vertex builds TF_CONFIG itself for a CustomJob, so the trial id reaches the replicas as
CLOUD_ML_TRIAL_ID in every pool's container env, and the CustomJob carries labels."""
from __future__ import annotations

import json

from tests.fakes.harness import fake_logging, fake_vertex, harness, make_harness  # noqa: F401 - fixtures


def test_trials_reach_vertex_with_their_trial_id(harness):  # noqa: F811
    r = harness.client.post("/v1/sweeps", json={
        "template": "mwms-demo", "backend": "vertex", "algorithm": "grid",
        "parameters": {"learning_rate": {"values": [0.01, 0.001]}}, "max_parallel": 2,
        "objective": {"metric": "val_accuracy", "goal": "maximize"}})
    assert r.status_code == 201, r.text
    sweep = r.json()
    harness.reconcile()     # the sweep launcher creates the trial jobs
    harness.reconcile()     # the vertex loop submits them
    trials = {t["number"]: t for t in harness.client.get(f"/v1/sweeps/{sweep['id']}").json()["trials"]}
    for n in (1, 2):
        [cj] = harness.fake.find(trials[n]["job_id"])
        assert cj["labels"]["trainjobs_sweep_id"] == sweep["id"] and cj["labels"]["trainjobs_trial"] == str(n)
        for pool in cj["jobSpec"]["workerPoolSpecs"]:
            assert {"name": "CLOUD_ML_TRIAL_ID", "value": str(n)} in pool["containerSpec"]["env"]
        args = cj["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
        assert f"--learning-rate={trials[n]['parameters']['learning_rate']}" in args
        # The job view shows the env as Vertex gives it: the trial in the env, not in TF_CONFIG.
        job = harness.job(trials[n]["job_id"])
        for replica in job["cluster"]:
            assert replica["env"]["CLOUD_ML_TRIAL_ID"] == str(n)
            assert "trial" not in json.loads(replica["env"]["TF_CONFIG"])["task"]
        harness.fake.set_state(trials[n]["job_id"], "JOB_STATE_SUCCEEDED")
    harness.reconcile()
    done = harness.client.get(f"/v1/sweeps/{sweep['id']}").json()
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"SUCCEEDED": 2}
    assert done["best"] is None     # nothing reported val_accuracy
