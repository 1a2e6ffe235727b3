"""Issue 39, point 2: one Vertex AI call budget for the region (TRAINJOBS_VERTEX_CALLS_PER_MINUTE).

Against the fake JobService, on the fakes' clock: the budget is never exceeded whatever the
controller has to do; creates and cancels go before the listings when it is short; every
job's state is still refreshed (less often), and the job view says how old it is; a job that
ended is found at a constant cost whatever the number of ended CustomJobs in the project."""
from __future__ import annotations

from datetime import datetime

import pytest

from service.backends.vertex.budget import VERTEX, Bucket
from tests.backends.vertex.test_backend import only_custom_job
from tests.fakes.harness import fake_logging, fake_vertex, harness, make_harness  # noqa: F401 - fixtures


def _short_budget(h, clock, *, per_minute: float, burst: int) -> Bucket:
    """The vertex bucket of the running backend replaced by a small one (the others stay large)."""
    budget = h.backend.budget
    bucket = Bucket(VERTEX, per_minute, burst, clock=clock.monotonic)
    budget.buckets[VERTEX] = bucket
    budget.reserve = float(burst // 2)
    return bucket


def test_the_call_budget_is_never_exceeded_and_every_state_is_still_refreshed(make_harness, fake_vertex,
                                                                             monkeypatch):
    """30 calls a minute, 4 at once, against 10 jobs listed 2 a page (6 calls a listing), jobs
    launched, cancelled and ending meanwhile: over every stretch of the run the calls stay
    within the bucket's promise (4 + 30 a minute), and the states all arrive, later."""
    with make_harness(vertex_calls_per_minute=30, vertex_calls_burst=4, vertex_list_page_size=2,
                      vertex_poll_interval_seconds=10) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()
        jobs = [h.submit(launch=False)["id"] for _ in range(10)]
        start = clock.monotonic()
        calls: list[tuple[float, int]] = [(0.0, fake_vertex.total_calls)]
        for step in range(200):                       # 100 simulated seconds, a pass every 0.5 s
            if step == 60:
                for jid in jobs[:7]:
                    fake_vertex.set_state(jid, "JOB_STATE_RUNNING")
                h.client.post(f"/v1/jobs/{jobs[7]}/cancel")
            if step == 120:
                for jid in jobs[:3]:
                    fake_vertex.set_state(jid, "JOB_STATE_SUCCEEDED")
                fake_vertex.complete_cancels()
            h.reconcile()
            calls.append((clock.monotonic() - start, fake_vertex.total_calls))
            clock.advance(0.5)
        for i, (t0, c0) in enumerate(calls):
            for t1, c1 in calls[i + 1:]:
                assert c1 - c0 <= 4 + 30 * (t1 - t0) / 60 + 1e-9, (t0, t1, c1 - c0)
        # Used, not idle: 10 creates waiting for it at the start, listings at half of it after.
        assert fake_vertex.total_calls > 30 and calls[10][1] < 10 and calls[0][1] == 0
        states = {jid: h.job(jid)["state"] for jid in jobs}
        assert [states[j] for j in jobs[:3]] == ["SUCCEEDED"] * 3
        assert [states[j] for j in jobs[3:7]] == ["RUNNING"] * 4
        assert states[jobs[7]] == "CANCELLED"
        assert [states[j] for j in jobs[8:]] == ["PENDING"] * 2


def test_creates_and_cancels_go_before_listings_when_the_budget_is_short(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_poll_interval_seconds=10) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()
        running = [h.submit()["id"] for _ in range(3)]
        for jid in running:
            fake_vertex.set_state(jid, "JOB_STATE_RUNNING")
        # 3 calls left and (at 1 a minute) none to come soon; following leaves 1 of them.
        bucket = _short_budget(h, clock, per_minute=1, burst=3)
        h.client.post(f"/v1/jobs/{running[0]}/cancel")
        new = h.submit(launch=False)["id"]
        clock.advance(11)                           # the listing is due
        fake_vertex.reset_calls()
        h.reconcile()
        assert fake_vertex.calls["cancel"] == 1 and fake_vertex.calls["create"] == 1
        assert fake_vertex.calls["list"] == 0 and fake_vertex.calls["get"] == 0
        assert h.job(new)["backend_ref"] == only_custom_job(fake_vertex, new)["name"]
        assert h.job(running[1])["state"] == "QUEUED"      # not refreshed yet: Vertex says RUNNING
        assert bucket.usage.granted == 2
        # The budget comes back: the listing goes ahead and the states arrive.
        clock.advance(180)
        h.reconcile()
        assert fake_vertex.calls["list"] >= 1
        assert [h.job(j)["state"] for j in running[1:]] == ["RUNNING", "RUNNING"]


@pytest.mark.parametrize("ended", [0, 1200])
def test_a_job_that_ended_is_found_at_a_constant_cost(make_harness, fake_vertex, ended):
    """It left the running list: one lookup by its label finds it, whatever the ended
    CustomJobs of the project (before, the ended ones were paged through, newest first)."""
    with make_harness(vertex_list_page_size=50) as h:
        job = h.submit()["id"]
        fake_vertex.seed(ended, state="JOB_STATE_SUCCEEDED")    # newer than it, listed first
        fake_vertex.set_state(job, "JOB_STATE_SUCCEEDED")
        fake_vertex.reset_calls()
        h.reconcile()
        assert h.job(job)["state"] == "SUCCEEDED"
        assert fake_vertex.calls["list"] == 2 and fake_vertex.total_calls == 2   # the running list, the lookup
        assert fake_vertex.list_filters()[1] == f'labels.trainjobs_job_id="{job}"'


@pytest.mark.parametrize("ended", [0, 1200])
def test_a_job_with_an_earlier_attempt_is_looked_up_at_a_constant_cost(make_harness, fake_vertex, monkeypatch,
                                                                       ended):
    with make_harness(vertex_submit_grace_seconds=60, vertex_poll_interval_seconds=10,
                      vertex_list_page_size=50) as h:
        clock = h.use_clock(monkeypatch)
        fake_vertex.seed(ended, state="JOB_STATE_SUCCEEDED")
        fake_vertex.fail("create", 503, apply=True)         # it landed; the answer was lost
        job = h.submit()["id"]
        assert h.job(job)["backend_ref"] is None
        fake_vertex.reset_calls()
        clock.advance(11)
        h.reconcile()
        assert h.job(job)["backend_ref"] == only_custom_job(fake_vertex, job)["name"]
        assert fake_vertex.calls["list"] == 1 and fake_vertex.total_calls == 1   # its label, one page


def test_the_job_view_says_how_old_its_state_is(make_harness, fake_vertex, monkeypatch):
    with make_harness(vertex_poll_interval_seconds=10) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()
        job = h.submit()["id"]
        assert h.job(job)["state_observed_at"] is None        # launched, not yet seen on Vertex
        fake_vertex.set_state(job, "JOB_STATE_RUNNING")
        clock.advance(11)
        h.reconcile()
        seen = h.job(job)
        listed_at = datetime.fromisoformat(seen["state_observed_at"])
        assert seen["state"] == "RUNNING" and abs((clock.utcnow() - listed_at).total_seconds()) < 1
        clock.advance(5)
        h.reconcile()                                         # no listing within the interval
        again = h.job(job)
        assert again["state_observed_at"] == seen["state_observed_at"]
        assert again["updated_at"] == seen["updated_at"]
        clock.advance(6)
        h.reconcile()                                         # a listing: confirmed, not changed
        later = h.job(job)
        assert (datetime.fromisoformat(later["state_observed_at"]) - listed_at).total_seconds() >= 11
        assert later["updated_at"] == seen["updated_at"]      # a confirmation is no change of the job


def test_ended_jobs_are_looked_up_one_a_call_if_vertex_refuses_or(make_harness, fake_vertex, monkeypatch):
    """Vertex's reference documents OR in customJobs.list filters; should a region answer 400
    to it, the lookup goes on one label a call (still a constant per job), never stuck."""
    from tests.fakes.server import GoogleError
    real = type(fake_vertex)._list

    def refusing_or(self, req, int_enums):
        if " OR " in req.query.get("filter", ""):
            raise GoogleError(400, "Invalid filter: OR is not supported here")
        return real(self, req, int_enums)
    monkeypatch.setattr(type(fake_vertex), "_list", refusing_or)
    with make_harness() as h:
        jobs = [h.submit()["id"] for _ in range(2)]
        for jid in jobs:
            fake_vertex.set_state(jid, "JOB_STATE_SUCCEEDED")
        h.reconcile()                        # the running list shows neither; the lookup is refused
        assert "SUCCEEDED" not in [h.job(j)["state"] for j in jobs]
        fake_vertex.reset_calls()
        h.reconcile()
        assert [h.job(j)["state"] for j in jobs] == ["SUCCEEDED", "SUCCEEDED"]
        assert fake_vertex.list_filters() == [f'labels.trainjobs_job_id="{j}"' for j in jobs]   # no new listing yet


def test_a_custom_job_someone_else_made_with_a_jobs_label_is_never_followed(harness):
    """Code with the project's permissions (a replica's service account) can create a CustomJob
    carrying another job's label. A job that has its CustomJob follows that one, by name: the
    listing's pick by label (the lower name) never replaces it, and its end is still found."""
    job = harness.submit(launch=False)["id"]
    [other] = harness.fake.seed(1, job_ids=[job])           # RUNNING, a lower name than ours
    harness.reconcile()
    ours = harness.job(job)["backend_ref"]
    assert ours and ours != other
    harness.fake.set_state(ours, "JOB_STATE_RUNNING")
    harness.reconcile()
    assert (harness.job(job)["backend_ref"], harness.job(job)["state"]) == (ours, "RUNNING")
    harness.fake.set_state(ours, "JOB_STATE_FAILED", error=(3, "bad flag"))
    harness.reconcile()
    assert (harness.job(job)["backend_ref"], harness.job(job)["state"]) == (ours, "FAILED")


def test_the_renamed_crud_setting_is_refused_at_start_up(api_client, db_url, fake_vertex, fake_logging, monkeypatch):
    """A deployment that still sets the old get/list/cancel budget is told, not silently given 120."""
    from service.backends.vertex.config import VertexConfigError
    from tests.fakes.harness import vertex_settings
    monkeypatch.setenv("TRAINJOBS_VERTEX_CRUD_PER_MINUTE", "600")
    with pytest.raises(VertexConfigError, match="set TRAINJOBS_VERTEX_CALLS_PER_MINUTE instead"):
        with api_client(vertex_settings(db_url, fake_vertex, fake_logging)):
            pass
