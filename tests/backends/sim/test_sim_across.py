"""Issue 52.1: a job may run on several backends. A template declares the backends it accepts,
most preferred first; the job waits in each one's queue and starts on exactly one (the most
preferred that admits it in a pass, else the first that frees), and its view, events and CLI say
where and why. Through the real app and controller, the sim under two names (bench/sim_cohorts.py),
on SQLite and PostgreSQL."""
from __future__ import annotations

import re
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from service.lifecycle.engine import Deposed
from service.persistence.models import Job, JobBackend
from service.persistence.session import make_engine, make_session_factory
from tests.apikit import assert_problem
from tests.backends.localkit import Api
from tests.backends.sim.simkit import As, run_of, settings, template
from tests.conftest import make_token
from tests.waiting import wait_for

LONG = {"sim-duration-seconds": "3600"}


@pytest.fixture
def api(api_client, db_url, token, cohorts) -> Api:
    client = api_client(settings(db_url, backends=cohorts, default_backend="sim1",
                                 capacity={"sim1": {"core": 1}, "sim2": {"core": 1}}), token)
    api = Api(client)
    template(api, "either", LONG, backends=["sim1", "sim2"])
    return api


def _post(api: Api, **body) -> dict:
    r = api.c.post("/v1/jobs", json={"template": "either", **body})
    assert r.status_code == 201, r.text
    return r.json()


def _placed(api: Api, job_id: str) -> list[str]:
    return [e["reason"] for e in api.events(job_id) if e["reason"].startswith("placed on ")]


def test_the_most_preferred_that_admits_it_else_the_first_that_frees(api):
    first = _post(api)
    assert first["backend"] == "sim1" and first["accepts"] == ["sim1", "sim2"] and first["placement"] is None
    running = api.wait_state(first["id"], "RUNNING")
    assert running["backend"] == "sim1", running          # both free: the preferred one
    assert running["placement"].startswith("placed on sim1: sim1: admitted, 1 of 1 core free; sim2: 1 of 1 core free")
    second = _post(api)
    running = api.wait_state(second["id"], "RUNNING")
    assert running["backend"] == "sim2", running          # sim1 is full: the other one
    assert "sim1: 0 of 1 core free; sim2: admitted, 1 of 1 core free" in running["placement"], running
    assert run_of(running).run_ms == 3_600_000
    assert _placed(api, second["id"]) == [running["placement"]]
    third = _post(api)
    wait_for(lambda: api.job(third["id"])["queue"] is not None, "the third waits in a queue")
    waiting = api.job(third["id"])
    assert waiting["state"] == "QUEUED" and waiting["placement"] is None and waiting["backend"] == "sim1"
    # sim2 frees first: the third starts there, though sim1 is preferred.
    assert api.c.post(f"/v1/jobs/{second['id']}/cancel").status_code in (200, 202)
    running = api.wait_state(third["id"], "RUNNING")
    assert running["backend"] == "sim2" and "sim2: admitted" in running["placement"], running
    assert api.job(first["id"])["backend"] == "sim1"


def test_a_job_is_in_each_backends_queue_until_placed(api, db_url):
    blockers = [_post(api, backend=name) for name in ("sim1", "sim2")]
    for b in blockers:
        assert b["accepts"] == [] and api.wait_state(b["id"], "RUNNING")["backend"] == b["backend"]
    waiting = _post(api)

    def queues() -> dict:
        return {q["backend"]: q["waiting_jobs"] for q in api.c.get("/v1/queue").json()["items"]}
    wait_for(lambda: queues() == {"sim1": 1, "sim2": 1}, "the job counted in both queues")
    # Its view gives its place in each queue, most preferred first; `queue` is sim1's.
    wait_for(lambda: all(p["position"] == 1 for p in api.job(waiting["id"])["queues"].values()), "placed in both")
    view = api.job(waiting["id"])
    assert list(view["queues"]) == ["sim1", "sim2"], view["queues"]
    assert view["queue"]["position"] == view["queues"]["sim1"]["position"] == 1, view
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            rows = s.execute(select(JobBackend.backend, JobBackend.rank, JobBackend.demand)
                             .where(JobBackend.job_id == uuid.UUID(waiting["id"])).order_by(JobBackend.rank)).all()
            assert [tuple(r) for r in rows] == [("sim1", 0, {"core": 1}), ("sim2", 1, {"core": 1})]
    finally:
        engine.dispose()
    assert api.c.post(f"/v1/jobs/{blockers[0]['id']}/cancel").status_code in (200, 202)
    running = api.wait_state(waiting["id"], "RUNNING")
    assert running["backend"] == "sim1" and running["queues"] == {} and running["queue"] is None, running
    wait_for(lambda: queues() == {"sim1": 0, "sim2": 0}, "out of both queues once placed")


def test_one_422_names_every_backends_problem(api):
    template(api, "big", LONG, workers=2, backends=["sim1", "sim2"])   # 3 cores; each backend has 1
    r = api.c.post("/v1/jobs", json={"template": "big"})
    body = assert_problem(r, 422)
    fields = [p["field"] for p in body["errors"]]
    assert fields == ["backends.sim1", "backends.sim2"], body
    assert body["errors"][0]["message"].startswith("sim1: the job asks 3 core")
    assert body["errors"][1]["message"].startswith("sim2: the job asks 3 core")
    template(api, "unknown", LONG, backends=["sim2", "nowhere"])
    body = assert_problem(api.c.post("/v1/jobs", json={"template": "unknown"}), 422)
    assert [p["field"] for p in body["errors"]] == ["backends.nowhere"], body
    bad = api.c.post("/v1/templates", json={"name": "twice", "spec": {
        "container": {"image_uri": "trainer:1"}, "backends": ["sim1", "sim1"]}})
    assert bad.status_code == 422 and "more than once" in bad.text, bad.text


def test_a_member_narrows_the_list_never_widens_it(api, db_url):
    member = As(api.c, make_token(db_url, "alpha", "member"))
    narrowed = member.post("/v1/jobs", json={"template": "either", "backend": "sim2"})
    assert narrowed.status_code == 201 and narrowed.json()["backend"] == "sim2" and narrowed.json()["accepts"] == []
    outside = member.post("/v1/jobs", json={"template": "either", "backend": "sim3"})
    assert assert_problem(outside, 422)["errors"][0]["field"] == "backend"
    # overrides.backends needs the template's overridable list to name it.
    assert member.post("/v1/jobs", json={"template": "either", "overrides": {"backends": ["sim2"]}}).status_code == 403
    template(api, "open", LONG, backends=["sim1", "sim2"], overridable=["backends"])
    ok = member.post("/v1/jobs", json={"template": "open", "overrides": {"backends": ["sim2", "sim1"]}})
    assert ok.status_code == 201 and ok.json()["accepts"] == ["sim2", "sim1"], ok.text
    assert ok.json()["backend"] == "sim2"
    wider = member.post("/v1/jobs", json={"template": "open", "overrides": {"backends": ["sim1", "sim3"]}})
    assert assert_problem(wider, 422)["errors"][0]["field"] == "overrides.backends"


def test_a_template_of_one_backend_is_unchanged(api, db_url):
    template(api, "plain", LONG)
    job = api.c.post("/v1/jobs", json={"template": "plain", "backend": "sim2"}).json()
    assert job["backend"] == "sim2" and job["accepts"] == [] and job["placement"] is None
    running = api.wait_state(job["id"], "RUNNING")
    assert running["backend"] == "sim2" and running["placement"] is None
    assert _placed(api, job["id"]) == []
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            assert s.scalar(select(Job.accepts).where(Job.id == uuid.UUID(job["id"]))) is None
            assert s.scalars(select(JobBackend).where(JobBackend.job_id == uuid.UUID(job["id"]))).all() == []
    finally:
        engine.dispose()


def test_the_claim_is_one_backends_alone(api):
    """Two loops that both admit the job: the first attempt's write claims it, the other's is
    refused; the claimed backend's own later attempts (a restart, a retry of the submit) pass;
    a deposed controller's write is refused. The controller's own loops run meanwhile: both
    backends are full, so neither plans to launch it."""
    blockers = [_post(api, backend=name) for name in ("sim1", "sim2")]
    for b in blockers:
        api.wait_state(b["id"], "RUNNING")
    job_id = uuid.UUID(_post(api)["id"])
    services = api.c.app.state.services
    engine = services.lifecycle
    with services.session_factory() as s:
        assert engine.mark_launch_attempt(s, job_id, fence=None, claim=("sim2", "sim2: admitted"))
        s.commit()
        assert not engine.mark_launch_attempt(s, job_id, fence=None, claim=("sim1", "sim1: admitted"))
        assert engine.mark_launch_attempt(s, job_id, fence=None, claim=("sim2", "sim2: admitted again"))
        s.commit()
        stale = (services.controller.epoch or 0) + 1000
        with pytest.raises(Deposed):
            engine.mark_launch_attempt(s, job_id, fence=stale, claim=("sim2", "late"))
        s.rollback()
        row = s.execute(select(Job.backend, Job.demand, Job.placement, Job.state).where(Job.id == job_id)).one()
    assert tuple(row) == ("sim2", {"core": 1}, "placed on sim2: sim2: admitted again", "QUEUED")
    assert _placed(api, str(job_id)) == ["placed on sim2: sim2: admitted", "placed on sim2: sim2: admitted again"]
    # Claimed: it is in sim2's queue alone, and sim1 freeing changes nothing for it.
    assert api.c.post(f"/v1/jobs/{blockers[0]['id']}/cancel").status_code in (200, 202)
    assert api.c.post(f"/v1/jobs/{blockers[1]['id']}/cancel").status_code in (200, 202)
    assert api.wait_state(str(job_id), "RUNNING")["backend"] == "sim2"


def test_a_relaunch_and_the_ui_form_let_the_queue_place_it_again(api, token):
    job = _post(api, display_name="again")
    api.wait_state(job["id"], "RUNNING")
    again = api.c.post(f"/v1/jobs/{job['id']}/relaunch", json={})
    assert again.status_code == 201 and again.json()["accepts"] == ["sim1", "sim2"], again.text
    pinned = api.c.post(f"/v1/jobs/{job['id']}/relaunch", json={"backend": "sim2"})
    assert pinned.status_code == 201 and pinned.json()["accepts"] == [] and pinned.json()["backend"] == "sim2"
    ui = TestClient(api.c.app)
    login = ui.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)
    assert ui.post("/ui/login", data={"csrf": csrf, "token": token, "next": "/ui/jobs"},
                   follow_redirects=False).status_code == 303
    page = ui.get("/ui/templates/either/launch")
    assert page.status_code == 200 and '<option value="" selected>any of sim1, sim2 (the queue places it)' in page.text
    form = {"csrf": re.search(r'name="csrf" value="([^"]+)"', page.text).group(1), "backend": "", "action": "launch",
            "version": re.search(r'name="version" value="(\d+)"', page.text).group(1), "labels": "", "overrides": "",
            "idempotency_key": "ui-across-1", "display_name": "from-the-form"}
    r = ui.post("/ui/templates/either/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    launched = api.c.get("/v1/jobs", params={"template": "either"}).json()["items"]
    assert [j["id"] for j in launched if j["display_name"] == "from-the-form"], launched
    shown = api.job(next(j["id"] for j in launched if j["display_name"] == "from-the-form"))
    assert shown["accepts"] == ["sim1", "sim2"], shown
