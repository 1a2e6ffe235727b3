"""A job that accepts Vertex AI and another backend (issue 52.1), placed on Vertex, whose create
lands after the client gave up: its launch attempt claimed it for Vertex, so while the outcome is
unknown the other backend, free all along, never takes it; the CustomJob that lands is adopted,
and nothing is created or launched twice. A new controller (a second app on the same database,
as after a kill -9) goes on the same way. The fakes' clock stands for time."""
from __future__ import annotations

import pytest

from bench.sim_cohorts import register
from service.backends import registry
from service.demo import demo_template
from tests.backends.vertex.test_backend import only_custom_job
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


@pytest.fixture
def sim1():
    names = register(1)
    yield names[0]
    registry.unregister(names[0])


def test_a_claim_on_vertex_whose_create_lands_late_is_adopted_never_launched_elsewhere(make_harness, fake_vertex,
                                                                                        monkeypatch, sim1):
    over = dict(backends=["vertex", sim1], vertex_create_timeout_seconds=0.5, vertex_request_timeout_seconds=0.5,
                vertex_submit_grace_seconds=60, vertex_poll_interval_seconds=10)
    with make_harness(**over) as h:
        demo = demo_template().model_dump(mode="json", exclude_none=True)
        demo.update(name="either", spec={**demo["spec"], "backends": ["vertex", sim1]})
        r = h.client.post("/v1/templates", json=demo)
        assert r.status_code == 201, r.text
        clock = h.use_clock(monkeypatch)
        fake_vertex.slow_create(45)   # lands 45 s after it arrived, long after the client's 0.5 s
        job = h.submit(template="either")
        assert job["accepts"] == ["vertex", sim1] and job["state"] == "QUEUED" and job["backend_ref"] is None
        assert job["backend"] == "vertex" and job["placement"].startswith("placed on vertex: vertex: admitted")
        assert h.row(job["id"]).launch_attempted_at is not None   # claimed; its outcome is unknown
        for _ in range(4):            # 20 s of passes: the sim is free, but the job is Vertex's
            clock.advance(5)
            h.reconcile()
            assert h.job(job["id"])["backend"] == "vertex" and fake_vertex.calls["create"] == 1
    with make_harness(**over) as h:   # the next controller
        clock = h.use_clock(monkeypatch)
        for _ in range(4):
            clock.advance(5)
            h.reconcile()
            assert h.job(job["id"])["backend"] == "vertex" and fake_vertex.calls["create"] == 1
        clock.advance(5)              # 45 s: Google finishes the create nobody waits for any more
        fake_vertex.wait_for_landed()
        clock.advance(5)
        h.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        adopted = h.job(job["id"])
        assert adopted["backend"] == "vertex" and adopted["backend_ref"] == cj["name"], adopted
        assert fake_vertex.calls["create"] == 1
        placed = [e["reason"] for e in h.events(job["id"]) if e["reason"].startswith("placed on ")]
        assert placed and all(p.startswith("placed on vertex: ") for p in placed), placed
        assert all(e["actor"] != sim1 for e in h.events(job["id"]))
