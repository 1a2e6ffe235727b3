"""`trainjobs jobs get` says where a job of several backends runs and why there (issue 52.1):
a real subprocess against a real service with no controller (the sim under two names), the job's
row as the controller's claim leaves it."""
from __future__ import annotations

import uuid

import httpx
import pytest
from sqlalchemy import update

from bench.sim_cohorts import register
from service.app import create_app
from service.backends import registry
from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory
from tests.backends.localkit import thread_server
from tests.backends.sim.simkit import settings
from tests.conftest import bearer

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
WHY = "placed on sim2: sim1: 0 of 1 core free; sim2: admitted, 1 of 1 core free"


@pytest.fixture
def server(db_url):  # noqa: F811
    names = register(2)
    try:
        with thread_server(create_app(settings(db_url, backends=names, default_backend="sim1",
                                               run_reconciler=False))) as url:
            yield url
    finally:
        for name in names:
            registry.unregister(name)


def test_jobs_get_says_the_backends_and_the_placement(cli, server, token, db_url):
    with httpx.Client(base_url=server, timeout=60, headers=bearer(token)) as http:
        r = http.post("/v1/templates", json={"name": "either", "spec": {
            "container": {"image_uri": "trainer:1"}, "backends": ["sim1", "sim2"]}})
        assert r.status_code == 201, r.text
        job = http.post("/v1/jobs", json={"template": "either"}).json()
    waiting = cli("jobs", "get", job["id"]).stdout
    assert "sim1, sim2 (most preferred first)" in waiting and "placement" not in waiting
    # Its place in each queue it waits in, most preferred first (no controller: each would start it next).
    queues = [line.split(None, 2) for line in waiting.splitlines() if line.startswith("queue (")]
    assert [q[:2] for q in queues] == [["queue", "(sim1)"], ["queue", "(sim2)"]], waiting
    assert all(q[2].startswith("starts on the next pass") for q in queues), waiting
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            s.execute(update(Job).where(Job.id == uuid.UUID(job["id"])).values(backend="sim2", placement=WHY))
            s.commit()
    finally:
        engine.dispose()
    placed = cli("jobs", "get", job["id"]).stdout
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in placed.splitlines() if line.strip()}
    assert rows["backend"] == "sim2" and rows["backends"] == "sim1, sim2 (most preferred first)", placed
    assert rows["placement"] == WHY, placed
