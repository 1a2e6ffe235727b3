"""Less work lost to preemption (issue 52.5) through the service: a priority class's
min_runtime_seconds (the operator's API, audited, a clear 422 when out of bounds), and the real
controller on the sim backend preempting for priority only past the minimum runtime, and then
the job that loses least work (its latest checkpoint: the latest epoch its progress reported)."""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update

from service.core.clock import utcnow
from service.persistence.models import Job, JobEpoch
from tests.apikit import assert_problem
from tests.backends.conftest import token  # noqa: F401 (a fixture)
from tests.backends.localkit import Api
from tests.backends.sim.simkit import settings, submit, template
from tests.conftest import bearer, make_token


@pytest.fixture
def operator(db_url) -> dict[str, str]:
    return bearer(make_token(db_url, "ops", "operator"))


def test_a_class_sets_its_minimum_runtime_and_it_is_audited(client, operator):
    r = client.put("/v1/priority-classes/batch", json={"value": 0, "min_runtime_seconds": 120}, headers=operator)
    assert r.status_code == 200, r.text
    assert r.json()["min_runtime_seconds"] == 120
    assert client.get("/v1/priority-classes/batch").json()["min_runtime_seconds"] == 120
    r = client.put("/v1/priority-classes/batch", json={"value": 0}, headers=operator)    # back to the setting's
    assert r.json()["min_runtime_seconds"] is None
    audit = client.get("/v1/audit", headers=operator).json()["items"]
    assert audit[0]["before"]["min_runtime_seconds"] == 120 and audit[0]["after"]["min_runtime_seconds"] is None


@pytest.mark.parametrize("value, words", [
    (-1, "greater than or equal to 0"), (7 * 86_400 + 1, "less than or equal to 604800"),
    (60.5, "whole number"), (True, "not a boolean"), ("600", "not a string")])
def test_a_bad_minimum_runtime_is_a_clear_422(client, operator, value, words):
    r = client.put("/v1/priority-classes/batch", json={"value": 0, "min_runtime_seconds": value}, headers=operator)
    problem = assert_problem(r, 422, "min_runtime_seconds")
    assert words in next(e["message"] for e in problem["errors"] if e["field"] == "min_runtime_seconds"), problem
    assert client.get("/v1/priority-classes/batch").status_code == 404          # nothing stored


def test_the_controller_waits_out_the_minimum_runtime_then_takes_the_job_losing_least(api_client, db_url, token):
    ops = bearer(make_token(db_url, "ops", "operator"))
    alpha = Api(api_client(settings(db_url, capacity={"sim": {"core": 2}}), token))
    for name, body in (("batch", {"value": 0, "min_runtime_seconds": 7200}), ("urgent", {"value": 100, "preempts": True})):
        assert alpha.c.put(f"/v1/priority-classes/{name}", json=body, headers=ops).status_code == 200
    template(alpha, "long", {"sim-duration-seconds": "36000"}, priority_class="batch")
    template(alpha, "short", {"sim-duration-seconds": "1"}, priority_class="urgent")
    older, younger = (submit(alpha, "long")["id"] for _ in range(2))
    for job_id in (older, younger):
        alpha.wait_state(job_id, "RUNNING")
    services = alpha.c.app.state.services
    now = utcnow()
    with services.session_factory() as session:
        # The older started 100 minutes ago and reached a checkpoint a moment ago; the younger
        # started 30 minutes ago and has reported none: all its run would be lost.
        for job_id, ago in ((older, 100), (younger, 30)):
            session.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(started_at=now - timedelta(minutes=ago)))
        session.add(JobEpoch(job_id=uuid.UUID(older), epoch=1, metrics={}, at=now - timedelta(seconds=1)))
        session.commit()
    urgent = submit(alpha, "short")["id"]
    # Both ran less than their class's two hours (past the setting's ten minutes): the plan the
    # controller acts on preempts neither, and the urgent job waits.
    with services.session_factory() as session:
        plan = services.controller.planner.plan(session, "sim", utcnow())
    assert plan.preempt == [] and uuid.UUID(urgent) in plan.waiting
    # The operator lets batch jobs go at once (the change wakes the controller): the older job
    # loses a second of work, the younger its 30 minutes: the older goes.
    r = alpha.c.put("/v1/priority-classes/batch", json={"value": 0, "min_runtime_seconds": 0}, headers=ops)
    assert r.status_code == 200, r.text
    assert alpha.wait_state(urgent, "SUCCEEDED", "FAILED", timeout=60)["state"] == "SUCCEEDED"
    err = alpha.job(older)["error"]
    assert err["cause"] == "preemption" and err["kind"] == "priority", err
    assert alpha.job(younger)["state"] == "RUNNING"
