"""Issue 51.3: a controller pass leaves the plan alone while nothing it reads has changed since a
plan that decided nothing (service/lifecycle/quiet.py): 10,000 waiting jobs and 2,000 held ones
cost one aggregate query a pass, not the planner's read of each. Any write the plan reads (a
submit, an end, a cancel, a share, a limit) or a backoff running out makes the next pass plan
again, on SQLite and PostgreSQL."""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update

from service.core.clock import utcnow
from service.lifecycle import quiet
from service.persistence.models import BackendCapacity, Job
from tests.backends.localkit import Api
from tests.backends.sim.simkit import settings, submit, template
from tests.conftest import make_token


@pytest.fixture
def sim(api_client, db_url):
    """One core of sim capacity, no controller thread: the test runs each pass itself."""
    client = api_client(settings(db_url, capacity={"sim": {"core": 1}}, run_reconciler=False),
                        make_token(db_url, "alpha", "admin"))
    api = Api(client)
    template(api, "long", {"sim-duration-seconds": "3600"})
    controller = client.app.state.services.controller
    controller.run_once()                     # this process takes the controller lock
    return api, controller.loops["sim"]


def _signature(api: Api, at=None) -> tuple:
    with api.c.app.state.services.session_factory() as session:
        return quiet.signature(session, "sim", at or utcnow())


def test_a_pass_plans_again_only_when_what_the_plan_reads_changed(sim):
    api, loop = sim
    running = submit(api, "long")
    assert loop.run_once().planned
    api.wait_state(running["id"], "PENDING", "RUNNING")
    waiting = submit(api, "long")             # no core left for it
    assert loop.run_once().planned            # a new job: planned, and nothing decided (no room)
    quiet_passes = [loop.run_once() for _ in range(3)]
    assert [s.planned for s in quiet_passes] == [False, False, False]
    assert api.job(waiting["id"])["state"] == "QUEUED"

    r = api.c.post(f"/v1/jobs/{running['id']}/cancel")
    assert r.status_code == 202, r.text
    stats = loop.run_once()                   # the cancel ends the running job: its core is free
    assert stats.planned and stats.submitted == 1
    assert api.wait_state(waiting["id"], "PENDING", "RUNNING")["state"] in ("PENDING", "RUNNING")


def test_the_signature_sees_every_write_the_plan_reads(sim):
    api, loop = sim
    submit(api, "long")
    loop.run_once()
    waiting = submit(api, "long")
    before = _signature(api)
    assert _signature(api) == before          # nothing written: the same
    submit(api, "long")
    after_submit = _signature(api)
    assert after_submit != before

    # A backoff running out is no write: the count of due jobs changes with the clock.
    with api.c.app.state.services.session_factory() as session:
        session.execute(update(Job).where(Job.id == uuid.UUID(waiting["id"]))
                        .values(not_before=utcnow() + timedelta(hours=1)))
        session.commit()
    held_back = _signature(api)
    assert held_back != after_submit
    assert _signature(api, utcnow() + timedelta(hours=2)) != held_back

    r = api.c.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 5, "on_exceed": "queue"})
    assert r.status_code in (200, 201), r.text
    limited = _signature(api)
    assert limited != held_back
    with api.c.app.state.services.session_factory() as session:   # as PUT /v1/capacity/sim writes it
        session.add(BackendCapacity(backend="sim", resource="core", amount=2))
        session.commit()
    assert _signature(api) != limited


def test_a_quiet_plan_is_made_again_after_replan_seconds(sim):
    api, loop = sim
    submit(api, "long")
    loop.run_once()
    submit(api, "long")
    assert loop.run_once().planned
    assert not loop.run_once().planned
    loop._quiet.replan_seconds = 0.0          # what changes with the clock alone is seen within it
    assert loop.run_once().planned


def test_the_replan_period_is_a_setting_that_reaches_every_loop(api_client, db_url, monkeypatch):
    """TRAINJOBS_RECONCILE_REPLAN_SECONDS: read from the environment, bounded, handed to each loop."""
    from pydantic import ValidationError

    from service.slices import Settings

    with pytest.raises(ValidationError, match="reconcile_replan_seconds"):
        Settings(database_url=db_url, reconcile_replan_seconds=0.1)
    monkeypatch.setenv("TRAINJOBS_RECONCILE_REPLAN_SECONDS", "42")
    client = api_client(settings(db_url, capacity={"sim": {"core": 1}}, run_reconciler=False),
                        make_token(db_url, "alpha", "admin"))
    controller = client.app.state.services.controller
    controller.run_once()
    assert controller.loops["sim"]._quiet.replan_seconds == 42.0
