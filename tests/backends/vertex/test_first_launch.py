"""Point 4 of issue 26: a job never attempted before is created without a label lookup
(none can find anything yet), so new jobs launch while customJobs.list answers 429/503;
a job whose earlier attempt may have landed is still looked up first and never gets a
second CustomJob, whatever the listings answer."""
from __future__ import annotations

from tests.backends.vertex.test_backend import only_custom_job
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


def test_new_jobs_launch_while_listings_fail(make_harness, fake_vertex, monkeypatch):
    with make_harness() as h:
        h.use_clock(monkeypatch)
        fake_vertex.fail("list", 503, times=1000)
        jobs = [h.submit(launch=False) for _ in range(3)]
        h.reconcile()
        for job in jobs:
            cj = only_custom_job(fake_vertex, job["id"])
            assert h.job(job["id"])["backend_ref"] == cj["name"]
        assert fake_vertex.calls["create"] == 3
        fake_vertex.clear_faults()


def test_new_jobs_launch_while_listings_are_rate_limited(make_harness, fake_vertex, monkeypatch):
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        first = h.submit(launch=False)
        h.reconcile()
        only_custom_job(fake_vertex, first["id"])
        fake_vertex.fail_rate_limit("list", times=1000)   # the CRUD budget pauses; creates do not
        clock.advance(15)
        h.reconcile()                                      # the poll's listing is refused
        second = h.submit(launch=False)
        h.reconcile()
        cj = only_custom_job(fake_vertex, second["id"])
        assert h.job(second["id"])["backend_ref"] == cj["name"]
        assert fake_vertex.calls["create"] == 2
        fake_vertex.clear_faults()


def test_lookups_are_made_for_a_job_with_an_earlier_attempt(make_harness, fake_vertex, monkeypatch):
    """A lost reply (the create landed, the answer did not): never created again, listings
    down or not; adopted by its label once they answer."""
    with make_harness(vertex_submit_grace_seconds=60, vertex_poll_interval_seconds=10) as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.fail("create", 503, apply=True)
        job = h.submit()
        assert h.job(job["id"])["backend_ref"] is None
        assert len(fake_vertex.find(job["id"])) == 1
        fake_vertex.fail("list", 503, times=1000)
        for _ in range(20):              # 200 s: well past the grace, listings still down
            clock.advance(10)
            h.reconcile()
            assert fake_vertex.calls["create"] == 1
            assert h.job(job["id"])["state"] == "QUEUED"
        fake_vertex.clear_faults()
        clock.advance(10)
        h.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        assert h.job(job["id"])["backend_ref"] == cj["name"]
        assert fake_vertex.calls["create"] == 1


def test_a_create_refused_with_429_is_made_at_once_next_time(make_harness, fake_vertex, monkeypatch):
    """A 429 created nothing: the attempt is forgotten, and the next create needs no lookup."""
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.fail_rate_limit("create")
        job = h.submit()
        assert h.row(job["id"]).launch_attempted_at is None
        fake_vertex.fail("list", 503, times=1000)
        clock.advance(60)                # the create budget's pause is over
        h.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        assert h.job(job["id"])["backend_ref"] == cj["name"]
        fake_vertex.clear_faults()
