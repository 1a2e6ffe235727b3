"""The Google-call budget (service/backends/vertex/budget.py) and what following Vertex
jobs costs: token buckets on a test clock, then the controller against the fake
JobService: a listing outage or a spent budget costs a pass one call (or none), never
a retry deadline; lists only every poll interval; a job that ended is looked up by its
label at a constant cost; jobs created under the old hyphenated label are still followed."""
from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import update

from service.backends.vertex.budget import Bucket, BudgetSpent
from service.persistence.models import Job
from tests.backends.vertex.test_backend import only_custom_job
from tests.fakes.clock import FakeClock
from tests.fakes.harness import fake_logging, fake_vertex, harness, make_harness  # noqa: F401 - fixtures


@pytest.fixture
def clock():
    return FakeClock()


def bucket(clock, per_minute=60, burst=3, **kw) -> Bucket:
    return Bucket("crud", per_minute, burst, clock=clock.monotonic, sleep=clock.advance, **kw)


def test_a_bucket_lets_a_burst_through_then_its_rate(clock):
    b = bucket(clock, per_minute=60, burst=3)
    assert [b.try_take() for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = b.try_take()
    assert wait == pytest.approx(1.0, abs=0.01)       # 60 a minute: one a second
    clock.advance(0.5)
    assert b.try_take() == pytest.approx(0.5, abs=0.01)
    clock.advance(0.5)
    assert b.try_take() == 0.0
    clock.advance(3600)                                # an idle hour saves up no more than the burst
    assert [b.try_take() for _ in range(4)][-1] > 0
    assert b.usage.granted == 7 and b.usage.refused == 3


def test_a_reserve_is_left_for_others(clock):
    b = bucket(clock, burst=3)
    assert b.try_take(reserve=2) == 0.0                # 3 -> 2
    assert b.try_take(reserve=2) > 0                   # would leave 1 of the 2 reserved
    assert b.try_take() == 0.0 and b.try_take() == 0.0


def test_a_429_pauses_the_kind_and_the_pause_doubles_until_a_call_succeeds(clock):
    b = bucket(clock, per_minute=600, burst=10, backoff_max=5)
    assert b.throttled() == 2.0
    assert b.paused() and b.try_take() == pytest.approx(2.0, abs=0.01)
    clock.advance(2)
    assert not b.paused()
    assert b.throttled() == 4.0
    assert b.throttled() == 5.0                        # capped by the longest backoff
    clock.advance(5)
    b.try_take()
    b.succeeded()
    assert b.throttled() == 2.0                        # from the beginning again
    assert b.usage.throttled == 4


def test_take_waits_within_its_limit_else_says_when(clock):
    b = bucket(clock, per_minute=6, burst=1)
    b.take()
    start = clock.monotonic()
    b.take(wait=15)                                    # 10 s to the next token: waited (on the test clock)
    assert clock.monotonic() - start == pytest.approx(10, abs=0.05)
    with pytest.raises(BudgetSpent) as e:
        b.take(wait=3)
    assert e.value.retry_after == pytest.approx(10, abs=0.05) and e.value.retry_after_header == "10"
    assert "6 calls a minute" in str(e.value)


def test_a_listing_outage_costs_a_pass_one_call_not_the_retry_deadline(make_harness, fake_vertex):
    with make_harness(vertex_retry_deadline_seconds=600) as h:
        job = h.submit()
        fake_vertex.reset_calls()
        fake_vertex.fail("list", 503, times=1000)
        stats = h.reconcile()
        assert fake_vertex.calls["list"] == 1      # one attempt: no retry inside the pass
        assert stats.errors == 1
        h.reconcile()
        assert fake_vertex.calls["list"] == 2
        assert h.job(job["id"])["state"] == "QUEUED"
        fake_vertex.clear_faults()
        h.reconcile()
        assert h.job(job["id"])["state"] == "PENDING"


def test_a_spent_request_budget_skips_following_without_a_call(make_harness, fake_vertex, monkeypatch):
    # 4 tokens at once, 2 of them reserved for creates and cancels: following needs 3.
    with make_harness(vertex_calls_per_minute=6, vertex_calls_burst=4) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()   # only advance() moves it: a loaded machine's seconds are not the test's
        job = h.submit()                           # the create alone (a new job needs no lookup): 4 -> 3
        fake_vertex.set_state(job["id"], "JOB_STATE_RUNNING")
        h.reconcile()                              # the listing: 3 -> 2
        assert h.job(job["id"])["state"] == "RUNNING"
        fake_vertex.set_state(job["id"], "JOB_STATE_SUCCEEDED")
        calls = fake_vertex.total_calls
        stats = h.reconcile()
        assert fake_vertex.total_calls == calls and stats.errors == 0
        assert h.job(job["id"])["state"] == "RUNNING"
        clock.advance(20)                          # two calls' worth: the running list, the ended job's lookup
        h.reconcile()
        assert h.job(job["id"])["state"] == "SUCCEEDED"
        assert fake_vertex.calls["list"] == 3 and fake_vertex.calls["get"] == 0


def test_jobs_are_listed_once_a_poll_interval_not_every_pass(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_poll_interval_seconds=10) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()   # only advance() moves it: a loaded machine's seconds are not the test's
        jobs = [h.submit() for _ in range(3)]
        fake_vertex.reset_calls()
        for j in jobs:
            fake_vertex.set_state(j["id"], "JOB_STATE_RUNNING")
        for _ in range(5):
            clock.advance(1)
            h.reconcile()
        assert fake_vertex.calls["list"] == 0
        clock.advance(6)
        h.reconcile()
        assert fake_vertex.calls["list"] == 1 and fake_vertex.total_calls == 1
        assert all(h.job(j["id"])["state"] == "RUNNING" for j in jobs)


def test_the_ended_lookup_stops_once_the_missing_job_is_found(make_harness, fake_vertex):
    with make_harness(vertex_list_page_size=5) as h:
        job = h.submit()
        # 40 older ended CustomJobs of ours within the window: the list returns newest first.
        created = fake_vertex.jobs[only_custom_job(fake_vertex, job["id"])["name"]].create_ns
        fake_vertex.seed(40, state="JOB_STATE_SUCCEEDED", created_ns=created - 60 * 10**9)
        fake_vertex.set_state(job["id"], "JOB_STATE_SUCCEEDED")
        fake_vertex.reset_calls()
        h.reconcile()
        assert h.job(job["id"])["state"] == "SUCCEEDED"
        assert fake_vertex.calls["list"] == 2      # the running list, then one lookup by its label


def test_a_job_cancelled_before_its_create_landed_pages_through_no_ended_jobs(make_harness, fake_vertex,
                                                                             monkeypatch):
    with make_harness(vertex_submit_grace_seconds=60, vertex_list_page_size=5) as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.seed(40, state="JOB_STATE_SUCCEEDED")
        fake_vertex.fail("create", 503)
        job = h.submit()
        h.client.post(f"/v1/jobs/{job['id']}/cancel")
        fake_vertex.reset_calls()
        h.reconcile()                 # its label looked up, the running list: no page of ended jobs
        assert h.job(job["id"])["state"] == "CANCELLING"
        assert f'labels.trainjobs_job_id="{job["id"]}"' in fake_vertex.list_filters()
        assert not any('state!="JOB_STATE_RUNNING"' in f for f in fake_vertex.list_filters())
        assert fake_vertex.calls["list"] <= 3
        clock.advance(61)             # no create can land any more
        fake_vertex.reset_calls()
        h.reconcile()
        assert h.job(job["id"])["state"] == "CANCELLED"
        assert not any('state!="JOB_STATE_RUNNING"' in f for f in fake_vertex.list_filters())
        assert fake_vertex.calls["list"] <= 1 and fake_vertex.calls["create"] == 0


def _make_legacy(h, fake_vertex, job_id: str) -> None:
    """As if created before the label key lost its hyphen: the old key on the CustomJob
    and in the job's compiled CustomJob."""
    for cj in fake_vertex.find(job_id):
        labels = cj["labels"]
        labels["trainjobs-job-id"] = labels.pop("trainjobs_job_id")
    with h.app.state.services.session_factory() as s:
        compiled = s.get(Job, uuid.UUID(job_id)).compiled
        compiled = json.loads(json.dumps(compiled))
        labels = compiled["custom_job"]["labels"]
        labels["trainjobs-job-id"] = labels.pop("trainjobs_job_id")
        s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(compiled=compiled))
        s.commit()


def test_jobs_created_under_the_old_label_key_are_still_followed(harness):
    job = harness.submit()
    _make_legacy(harness, harness.fake, job["id"])
    harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "RUNNING"
    assert harness.fake.calls["get"] == 0          # found by a list of the old key, not a get
    assert f'labels.trainjobs-job-id="{job["id"]}"' in harness.fake.list_filters()
    harness.fake.set_state(job["id"], "JOB_STATE_SUCCEEDED")
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "SUCCEEDED"


def test_a_job_of_before_whose_create_was_lost_is_found_by_the_old_key(harness):
    harness.fake.fail("create", 503, apply=True)
    job = harness.submit()
    assert harness.job(job["id"])["backend_ref"] is None
    _make_legacy(harness, harness.fake, job["id"])
    harness.reconcile()
    cj = harness.fake.find(job["id"])
    assert len(cj) == 1 and harness.job(job["id"])["backend_ref"] == cj[0]["name"]
    assert f'labels.trainjobs-job-id="{job["id"]}"' in harness.fake.list_filters()
    assert harness.fake.calls["create"] == 1
