"""Issue 51.1: the sim backend plays the shared-capacity role through the real controller: its
demand (a core per replica, or its sim-demand-* labels) is stored at submit and checked against
the capacity, its offered capacity is TRAINJOBS_SIM_CAPACITY, and a job the queue preempts stops
at once and ends as a preemption on any backend does (FAILED, error.cause "preemption", a new
attempt), on SQLite and PostgreSQL."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from service.auth.service import get_or_create_team
from service.persistence.models import Job, TeamShare
from service.persistence.session import make_engine, make_session_factory
from tests.apikit import assert_problem
from tests.backends.localkit import Api
from tests.backends.sim.simkit import As, run_of, settings, submit, template
from tests.conftest import make_token
from tests.waiting import wait_for


def _beta_owns_the_core(db_url: str) -> None:
    """beta: one core guaranteed on sim; alpha: no row, so it may borrow all of it."""
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            beta = get_or_create_team(session, "beta")
            session.add(TeamShare(team_id=beta.id, backend="sim", nominal={"core": 1}, borrowing_limit={},
                                  lending_limit={}, weight=1.0))
            session.commit()
    finally:
        engine.dispose()


@pytest.fixture
def teams(api_client, db_url, token):
    beta = make_token(db_url, "beta", "admin")
    _beta_owns_the_core(db_url)
    # At speed 5 beta's job of a second runs 0.2 s: the tests prove who runs and who is preempted.
    client = api_client(settings(db_url, capacity={"sim": {"core": 1}}, sim_capacity={"core": 64, "gpu": 8},
                                 sim_speed=5.0), token)
    alpha, beta_api = Api(client), Api(client)
    beta_api.c = As(client, beta)
    return alpha, beta_api


def _row(client, job_id) -> Job:
    with client.app.state.services.session_factory() as session:
        return session.execute(select(Job).where(Job.id == uuid.UUID(str(job_id)))).scalar_one()


def test_a_borrowed_sim_job_is_preempted_at_once_and_requeued(teams):
    alpha, beta = teams
    template(alpha, "long", {"sim-duration-seconds": "3600"})
    template(beta, "short", {"sim-duration-seconds": "1"})
    a = submit(alpha, "long")
    assert _row(alpha.c, a["id"]).demand == {"core": 1}     # a core per replica, stored at submit
    alpha.wait_state(a["id"], "RUNNING")

    b = submit(beta, "short")    # inside beta's nominal quota: alpha's borrowed core is reclaimed
    failed = alpha.wait_state(a["id"], "FAILED", "SUCCEEDED", "CANCELLED")
    assert failed["state"] == "FAILED"
    err = failed["error"]
    assert err["cause"] == "preemption" and err["kind"] == "reclaim", err
    assert err["backend_error"] == {"code": 1, "message": "CANCELLED: the job was preempted", "source": "sim"}
    assert run_of(failed).stopped_by == "preempted"     # stopped at once, not after a grace
    assert [e["to_state"] for e in alpha.events(a["id"])][-2:] == ["RUNNING", "FAILED"]
    assert [line["message"] for line in alpha.all_logs(a["id"])][-1] == "sim: workerpool0-0 stopped at once (preempted)"

    nxt = wait_for(lambda: alpha.job(a["id"]).get("retried_by"), "the preempted job's new attempt")
    row = _row(alpha.c, nxt)
    assert (row.attempt, row.preemptions, row.demand) == (2, 1, {"core": 1})
    assert beta.wait_state(b["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    assert alpha.wait_state(nxt, "RUNNING")["state"] == "RUNNING"   # the core is free again


def test_the_sims_demand_and_offered_capacity(teams):
    alpha, _ = teams
    template(alpha, "wide", {"sim-demand-core": "2", "sim-demand-gpu": "1"})
    r = alpha.c.post("/v1/jobs", json={"template": "wide"})
    body = assert_problem(r, 422, "backend")    # 2 cores asked, 1 in all
    assert "asks 2 cores; backend sim has 1 in all" in body["errors"][0]["message"], body
    template(alpha, "pair", workers=1)
    pair = alpha.c.post("/v1/jobs", json={"template": "pair", "labels": {"sim-demand-core": "1"}})
    assert pair.status_code == 201, pair.text
    assert _row(alpha.c, pair.json()["id"]).demand == {"core": 1}    # the labels, not a core per replica
    capacity = alpha.c.get("/v1/capacity/sim").json()
    assert (capacity["resources"], capacity["offered"]) == ({"core": 1}, {"core": 64, "gpu": 8})
