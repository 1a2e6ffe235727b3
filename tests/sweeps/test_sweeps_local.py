"""Sweeps whose trials are real local jobs: replica processes (programs/replica.py) that
print the trainer's epoch_end lines with a val_accuracy set by a trial's parameter.
The controller runs on its own threads, as in production; the tests wait for real signals."""
from __future__ import annotations

import json

import pytest

from tests.backends.localkit import assert_no_processes, job_processes
from tests.sweeps.helpers import create, get, template, unfinished
from tests.waiting import wait_for


def _wait_sweep(api, sweep_id: str, states: tuple[str, ...], max_parallel: int, timeout: float = 120) -> dict:
    seen = []

    def ended():
        sweep = get(api.c, sweep_id)
        assert unfinished(sweep) <= max_parallel, sweep["counts"]
        seen.append(sweep["counts"])
        return sweep if sweep["state"] in states else None
    try:
        return wait_for(ended, f"sweep {sweep_id} to reach {states}", timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}; last counts {seen[-1:]}") from None


def test_trials_are_ranked_by_their_objective_and_see_their_trial_id(make_client, work_dir, tmp_path):
    dump = tmp_path / "env"
    dump.mkdir()
    dump.chmod(0o777)  # the replicas, unprivileged uids when the tests run as root, write here
    api = make_client(sweep_interval_seconds=0.2)
    r = api.c.post("/v1/templates", json=template(["--dump-env", str(dump)], workers=["--exit", "0"]))
    assert r.status_code == 201, r.text
    sweep = create(api.c, parameters={"acc": {"values": [0.3, 0.9, 0.6]}}, max_parallel=2)
    done = _wait_sweep(api, sweep["id"], ("SUCCEEDED", "FAILED"), 2)
    assert done["state"] == "SUCCEEDED" and done["ended_at"], done
    assert done["counts"] == {"SUCCEEDED": 3}
    # Ranked by the best epoch's val_accuracy (epoch 1; the last epoch reports 0.05 less).
    assert [t["number"] for t in done["trials"]] == [2, 3, 1]
    for t in done["trials"]:
        acc = t["parameters"]["acc"]
        assert t["objective_value"] == pytest.approx(acc) and t["objective_epoch"] == 1
        assert t["last_value"] == pytest.approx(acc - 0.05)
    assert done["best"]["number"] == 2 and done["best"]["objective_value"] == pytest.approx(0.9)
    # Each replica of trial n saw TF_CONFIG task.trial == "n", as Vertex's tuning gives it.
    for n in (1, 2, 3):
        env = json.loads((dump / f"trial{n}-workerpool0-0.json").read_text())
        tf_config = json.loads(env["TF_CONFIG"])
        assert tf_config["task"] == {"type": "chief", "index": 0, "trial": str(n)}
        assert env["CLOUD_ML_TRIAL_ID"] == str(n)
        assert json.loads(env["CLUSTER_SPEC"])["task"]["trial"] == str(n)
    summary = api.c.get("/v1/sweeps").json()["items"][0]
    assert summary["best"]["number"] == 2 and summary["state"] == "SUCCEEDED"


def test_minimize_ranks_the_lowest_first(make_client, work_dir):
    api = make_client(sweep_interval_seconds=0.2)
    assert api.c.post("/v1/templates", json=template()).status_code == 201
    sweep = create(api.c, parameters={"acc": {"values": [0.4, 0.2]}}, max_parallel=2,
                   objective={"metric": "val_accuracy", "goal": "minimize"})
    done = _wait_sweep(api, sweep["id"], ("SUCCEEDED", "FAILED"), 2)
    # Minimizing: each trial's best is its last epoch (0.05 lower), the lowest trial first.
    assert [(t["number"], t["objective_epoch"]) for t in done["trials"]] == [(2, 2), (1, 2)]
    assert done["best"]["objective_value"] == pytest.approx(0.15)


def test_cancel_stops_running_trials_and_starts_no_more(make_client, work_dir, tmp_path):
    never = tmp_path / "never-created"
    api = make_client(sweep_interval_seconds=0.2)
    r = api.c.post("/v1/templates", json=template(["--wait-file", str(never)]))
    assert r.status_code == 201, r.text
    sweep = create(api.c, parameters={"acc": {"values": [0.1, 0.2, 0.3]}}, max_parallel=2)

    def two_running():
        s = get(api.c, sweep["id"])
        assert unfinished(s) <= 2
        return s if s["counts"].get("RUNNING") == 2 else None
    running = wait_for(two_running, "two trials running")
    job_ids = [t["job_id"] for t in running["trials"] if t["job_id"]]
    assert all(job_processes(work_dir, j) for j in job_ids)
    r = api.c.post(f"/v1/sweeps/{sweep['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING"
    done = _wait_sweep(api, sweep["id"], ("CANCELLED",), 2)
    assert done["counts"] == {"CANCELLED": 2, "WAITING": 1}
    for job_id in job_ids:
        assert_no_processes(work_dir, job_id)
        events = api.c.get(f"/v1/jobs/{job_id}/events").json()
        assert any(e["to_state"] == "CANCELLING" and "sweep" in e["reason"] for e in events)
    # The controller keeps passing: still no third trial.
    ticks = api.c.app.state.controller.ticks
    wait_for(lambda: api.c.app.state.controller.ticks >= ticks + 3, "a few more controller passes")
    assert get(api.c, sweep["id"])["counts"] == {"CANCELLED": 2, "WAITING": 1}


def test_two_service_processes_start_each_trial_once(make_client, work_dir):
    """Two apps on one database, each standing for election: only the controller starts trials."""
    first = make_client(sweep_interval_seconds=0.1, election_interval_seconds=0.2)
    second = make_client(sweep_interval_seconds=0.1, election_interval_seconds=0.2)
    assert first.c.post("/v1/templates", json=template()).status_code == 201
    sweep = create(first.c, parameters={"acc": {"values": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}}, max_parallel=3)
    done = _wait_sweep(second, sweep["id"], ("SUCCEEDED", "FAILED"), 3)
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"SUCCEEDED": 6}
    jobs = first.c.get("/v1/jobs", params={"limit": 50}).json()["items"]
    assert len(jobs) == 6 and sorted(j["display_name"] for j in jobs) == sorted(
        f"{sweep['display_name']}-{n}" for n in range(1, 7))
    assert [first.c.app.state.controller.active, second.c.app.state.controller.active].count(True) == 1
