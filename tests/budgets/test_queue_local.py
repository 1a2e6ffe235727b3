"""Queue mode with real local jobs: a job over its team's limit waits in QUEUED with the
limit as its waiting_reason, and launches once the team's running job ends."""
from __future__ import annotations

from tests.backends.conftest import make_client, token, work_dir  # noqa: F401 (fixtures)
from tests.backends.localkit import spec
from tests.cost.conftest import TEST_PRICES
from tests.waiting import wait_for

GATE = {"name": "gate", "type": "string"}


def test_a_queued_job_waits_for_its_team_limit_then_launches(make_client, tmp_path):
    api = make_client(local_max_running_jobs=4, price_file=TEST_PRICES, cost_region="us-central1")
    api.template("gated", spec(["--wait-file", "${gate}"]), parameters=[GATE])
    r = api.c.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 1, "on_exceed": "queue"})
    assert r.status_code == 200, r.text
    gate = tmp_path / "gate"
    first = api.submit("gated", parameters={"gate": str(gate)})["id"]
    api.wait_state(first, "RUNNING")
    second = api.submit("gated", parameters={"gate": str(gate)})["id"]

    waiting = wait_for(lambda: (j := api.job(second))["waiting_reason"] and j, "the second job's waiting reason")
    assert waiting["state"] == "QUEUED"
    assert "max_concurrent_jobs" in waiting["waiting_reason"] and "alpha" in waiting["waiting_reason"]
    assert api.job(first)["state"] == "RUNNING"     # the limit holds while the first runs

    gate.touch()                                    # the first job ends...
    assert api.wait_state(first, "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    done = api.wait_state(second, "SUCCEEDED", "FAILED")   # ...and the second launches and runs
    assert done["state"] == "SUCCEEDED" and done["waiting_reason"] is None
    assert done["cost"]["accrued"]["running"] is False
