"""Issue 52.2: a job of several backends placed by its wish (cheapest, soonest, the listed order,
a start_by deadline), with why in its view. Through the real app and controller, the sim under
two names (bench/sim_cohorts.py), on SQLite and PostgreSQL."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.apikit import assert_problem
from tests.backends.localkit import Api
from tests.backends.sim.simkit import settings, template

LONG = {"sim-duration-seconds": "3600"}


@pytest.fixture
def api(api_client, db_url, token, cohorts) -> Api:
    client = api_client(settings(db_url, backends=cohorts, default_backend="sim1",
                                 capacity={"sim1": {"core": 2}, "sim2": {"core": 2}},
                                 placement_prices={"sim1": {"core": 1.0}, "sim2": {"core": 0.1}}), token)
    return Api(client)


def test_a_cheapest_job_goes_to_the_cheaper_backend_though_listed_second(api):
    template(api, "thrifty", LONG, backends=["sim1", "sim2"], placement={"prefer": "cheapest"})
    template(api, "listed", LONG, backends=["sim1", "sim2"])
    cheap = api.c.post("/v1/jobs", json={"template": "thrifty"})
    assert cheap.status_code == 201, cheap.text
    assert cheap.json()["wish"] == {"prefer": "cheapest", "start_by": None, "prices": {"sim1": 1.0, "sim2": 0.1}}
    running = api.wait_state(cheap.json()["id"], "RUNNING")
    assert running["backend"] == "sim2", running
    assert running["placement"].startswith("placed on sim2: cheapest: sim2 0.10/h, sim1 1.00/h; "), running
    assert "sim2: admitted, 2 of 2 core free" in running["placement"], running
    assert any(e["reason"] == running["placement"] for e in api.events(running["id"]))
    # The same backends in the listed order: the first, as before.
    plain = api.c.post("/v1/jobs", json={"template": "listed"}).json()
    running = api.wait_state(plain["id"], "RUNNING")
    assert running["backend"] == "sim1" and running["placement"].startswith("placed on sim1: sim1: admitted"), running
    assert running["wish"] is None


def test_start_by_is_kept_with_the_listed_order(api):
    template(api, "soon", LONG, backends=["sim1", "sim2"], overridable=["placement"])
    by = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = api.c.post("/v1/jobs", json={"template": "soon", "overrides": {"placement": {"start_by": by}}})
    assert job.status_code == 201, job.text
    assert job.json()["wish"]["prefer"] == "listed" and job.json()["wish"]["start_by"] in (by, by.replace("Z", "+00:00"))
    running = api.wait_state(job.json()["id"], "RUNNING")
    assert running["backend"] == "sim1", running    # both free now: both meet it, the listed order holds
    assert running["placement"].startswith(f"placed on sim1: start by {by}; sim1: admitted"), running


def test_with_a_deadline_it_waits_for_the_cheaper_backend_that_frees_in_time(api):
    """sim2 (cheap) is full until its job's time limit, well before the deadline; sim1 (dear) has
    room. The job waits for sim2 rather than start on sim1 now; once sim2 frees it starts there."""
    template(api, "blocker", LONG, scheduling={"timeout_seconds": 600})
    template(api, "thrifty", LONG, backends=["sim1", "sim2"], placement={"prefer": "cheapest", "start_by": 3600})
    blockers = [api.c.post("/v1/jobs", json={"template": "blocker", "backend": "sim2"}).json() for _ in range(2)]
    for b in blockers:
        assert api.wait_state(b["id"], "RUNNING")["backend"] == "sim2"
    job = api.c.post("/v1/jobs", json={"template": "thrifty"})
    assert job.status_code == 201, job.text
    # A later job on sim1 starting shows the controller's passes have seen the first: it still waits.
    later = api.c.post("/v1/jobs", json={"template": "blocker", "backend": "sim1"}).json()
    api.wait_state(later["id"], "RUNNING")
    waiting = api.job(job.json()["id"])
    assert waiting["state"] == "QUEUED" and waiting["placement"] is None, waiting
    assert api.c.post(f"/v1/jobs/{blockers[0]['id']}/cancel").status_code in (200, 202)
    running = api.wait_state(job.json()["id"], "RUNNING")
    assert running["backend"] == "sim2", running
    assert running["placement"].startswith("placed on sim2: cheapest: sim2 0.10/h, sim1 1.00/h; start by "), running


def test_a_bad_wish_is_a_422_naming_the_field(api):
    bad = api.c.post("/v1/templates", json={"name": "odd", "spec": {
        "container": {"image_uri": "trainer:1"}, "backends": ["sim1", "sim2"], "placement": {"prefer": "fastest"}}})
    body = assert_problem(bad, 422)
    assert "placement.prefer" in bad.text and "'cheapest'" in bad.text and "'soonest'" in bad.text, body
    template(api, "open", LONG, backends=["sim1", "sim2"], overridable=["placement"])
    past = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    r = api.c.post("/v1/jobs", json={"template": "open", "overrides": {"placement": {"start_by": past}}})
    assert [p["field"] for p in assert_problem(r, 422)["errors"]] == ["placement.start_by"], r.text
    far = 400 * 86_400
    r = api.c.post("/v1/jobs", json={"template": "open", "overrides": {"placement": {"start_by": far}}})
    assert [p["field"] for p in assert_problem(r, 422)["errors"]] == ["placement.start_by"], r.text
    r = api.c.post("/v1/jobs", json={"template": "open", "overrides": {"placement": {"start_by": 0}}})
    assert "placement.start_by" in assert_problem(r, 422)["errors"][0]["field"], r.text
