"""At most one CustomJob per job, whatever Google's latency: creates that land after the
client gave up, creates that take 30 s, and the create budget. The fake's clock stands
for time (the lifecycle's launch stamps, the backend's timers and the budget read it
too), so "30 seconds later" needs no sleep; a slow create is held by the fake until its
clock gets there."""
from __future__ import annotations

import threading

import pytest

from tests.backends.vertex.test_backend import only_custom_job
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


class Pass(threading.Thread):
    """A controller pass in a thread of its own (it blocks on a slow create); its error, if any."""

    def __init__(self, harness):
        super().__init__(daemon=True)
        self.harness = harness
        self.error: BaseException | None = None

    def run(self):
        try:
            self.harness.reconcile()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def finish(self):
        self.join(60)
        assert not self.is_alive(), "the pass never finished"
        if self.error:
            raise self.error


def test_a_create_that_takes_30_s_is_waited_for_and_made_once(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_create_timeout_seconds=60, vertex_submit_grace_seconds=180) as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.slow_create(30)
        job = h.submit(launch=False)
        running = Pass(h)
        running.start()
        fake_vertex.wait_for_pending(1)
        assert fake_vertex.find(job["id"]) == []   # accepted, not there yet
        clock.advance(30)
        running.finish()
        cj = only_custom_job(fake_vertex, job["id"])
        assert h.job(job["id"])["backend_ref"] == cj["name"]
        # Google is told how long we wait (X-Server-Timeout, a system parameter for REST calls).
        assert fake_vertex.headers["create"]["x-server-timeout"] == "60"
        for _ in range(3):
            clock.advance(60)
            h.reconcile()
        only_custom_job(fake_vertex, job["id"])
        assert fake_vertex.calls["create"] == 1


def test_a_create_that_lands_after_the_client_gave_up_is_adopted_not_made_again(make_harness, fake_vertex,
                                                                                monkeypatch):
    with make_harness(vertex_create_timeout_seconds=0.5, vertex_request_timeout_seconds=0.5,
                      vertex_submit_grace_seconds=60, vertex_poll_interval_seconds=10) as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.slow_create(45)   # lands 45 s after it arrived, long after the client's 0.5 s
        job = h.submit()              # POST, then a pass whose create times out
        assert job["state"] == "QUEUED" and job["backend_ref"] is None and job["error"] is None
        assert h.row(job["id"]).launch_attempted_at is not None   # its outcome is unknown
        assert "could not launch it yet" in job["waiting_reason"]
        lists = fake_vertex.calls["list"]
        for _ in range(8):            # 40 s of passes: looked up by label every 10 s, never created again
            clock.advance(5)
            h.reconcile()
            assert fake_vertex.calls["create"] == 1 and fake_vertex.find(job["id"]) == []
        assert fake_vertex.calls["list"] - lists == 4
        waiting = h.job(job["id"])
        assert waiting["waiting_reason"].startswith("an earlier create attempt may still land")
        clock.advance(5)              # 45 s: Google finishes the create nobody waits for any more
        fake_vertex.wait_for_landed()
        clock.advance(5)
        h.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        adopted = h.job(job["id"])
        assert adopted["backend_ref"] == cj["name"] and adopted["waiting_reason"] is None
        clock.advance(120)            # long past the grace: still the one
        h.reconcile()
        h.reconcile()
        only_custom_job(fake_vertex, job["id"])
        assert fake_vertex.calls["create"] == 1
        assert h.job(job["id"])["state"] == "PENDING"


def test_after_the_grace_a_create_that_never_landed_is_made_once(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_submit_grace_seconds=60) as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.fail("create", 503)   # nothing created, but we cannot know that
        job = h.submit()
        assert h.job(job["id"])["backend_ref"] is None
        clock.advance(30)
        h.reconcile()
        assert fake_vertex.calls["create"] == 1
        clock.advance(31)                 # the attempt can no longer land: a lookup is the truth
        h.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        assert h.job(job["id"])["backend_ref"] == cj["name"]
        assert fake_vertex.calls["create"] == 2


def test_jobs_beyond_the_create_budget_wait_queued_and_say_why(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_create_per_minute=6, vertex_create_burst=2) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()   # the budget refills on this clock alone: a loaded machine's 10 s are not a create's worth
        jobs = [h.submit(launch=False) for _ in range(4)]
        h.reconcile()
        assert fake_vertex.calls["create"] == 2
        views = [h.job(j["id"]) for j in jobs]
        assert [bool(v["backend_ref"]) for v in views] == [True, True, False, False]
        assert views[2]["state"] == "QUEUED" and views[2]["waiting_reason"] == (
            "waiting for the Vertex AI create budget (6 a minute, 2 at once; TRAINJOBS_VERTEX_CREATE_PER_MINUTE)")
        # The plan's order is the order, and each job the budget holds back says why.
        assert views[3]["waiting_reason"] == views[2]["waiting_reason"]
        # Nothing was attempted, so nothing has to settle before its turn.
        assert h.row(jobs[2]["id"]).launch_attempted_at is None
        lists = fake_vertex.calls["list"]
        h.reconcile()
        assert fake_vertex.calls["create"] == 2
        assert fake_vertex.calls["list"] == lists + 1   # no lookup for a create that cannot go out
        clock.advance(10)                            # one create's worth at 6 a minute
        h.reconcile()
        assert fake_vertex.calls["create"] == 3
        third = h.job(jobs[2]["id"])
        assert third["backend_ref"] == only_custom_job(fake_vertex, jobs[2]["id"])["name"]
        assert third["waiting_reason"] is None
        assert h.job(jobs[3]["id"])["waiting_reason"].startswith("waiting for the Vertex AI create budget")
        clock.advance(10)
        h.reconcile()
        for j in jobs:
            only_custom_job(fake_vertex, j["id"])
        assert fake_vertex.calls["create"] == 4


def test_a_cancel_while_waiting_for_the_budget_ends_it_without_a_call(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_create_per_minute=1, vertex_create_burst=1) as h:
        h.use_clock(monkeypatch).freeze()
        _first, second = h.submit(launch=False), h.submit(launch=False)
        h.reconcile()
        assert h.job(second["id"])["waiting_reason"].startswith("waiting for the Vertex AI create budget")
        r = h.client.post(f"/v1/jobs/{second['id']}/cancel")
        assert r.status_code == 202 and r.json()["waiting_reason"] is None
        h.reconcile()
        assert h.job(second["id"])["state"] == "CANCELLED"
        assert fake_vertex.find(second["id"]) == [] and fake_vertex.calls["create"] == 1


@pytest.mark.parametrize("over", [
    {"vertex_create_timeout_seconds": 120},                                  # grace 180 < 2 x (5 + 120)
    {"vertex_create_timeout_seconds": 30, "vertex_submit_grace_seconds": 60},
])
def test_a_grace_shorter_than_a_submit_is_refused_at_start_up(make_harness, over):
    from service.backends.vertex import VertexConfigError

    with pytest.raises(VertexConfigError, match="TRAINJOBS_VERTEX_SUBMIT_GRACE_SECONDS=.*too short"):
        with make_harness(**over):
            pass
