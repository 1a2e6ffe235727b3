"""Vertex logs within Cloud Logging's read quota (entries.list: 60 a minute per project,
shared with everyone using Logs Explorer there): pages take the budget and answer 503
with Retry-After only when it is truly spent; followers that caught up cost one read per
interval per cursor, never wait, never take the people's share; a 429 pauses all reads."""
from __future__ import annotations

import time

import pytest

from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


def numeric(job: dict) -> str:
    return job["backend_ref"].rsplit("/", 1)[1]


def running_job(h) -> dict:
    job = h.submit()
    h.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    h.reconcile()
    return h.job(job["id"])


def test_a_page_answers_503_with_retry_after_only_when_the_budget_is_spent(make_harness, fake_logging,
                                                                           monkeypatch):
    with make_harness(logging_reads_per_minute=6, logging_reads_burst=2, logs_budget_wait_seconds=0) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()   # the Retry-After below is exact only if no real time passes meanwhile
        job = h.submit()
        fake_logging.add(numeric(job), "workerpool0-0", "hello")
        url = f"/v1/jobs/{job['id']}/logs"
        assert [h.client.get(url).status_code for _ in range(2)] == [200, 200]
        calls = fake_logging.calls["list"]
        r = h.client.get(url)
        assert r.status_code == 503 and r.headers["retry-after"] == "10"   # 6 a minute: one every 10 s
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "budget" in r.json()["detail"] and "TRAINJOBS" not in r.json()["detail"]
        assert fake_logging.calls["list"] == calls                        # refused here, not at Google
        clock.advance(10)
        page = h.client.get(url)
        assert page.status_code == 200 and [ln["message"] for ln in page.json()["lines"]] == ["hello"]


def test_a_429_from_cloud_logging_pauses_every_read(make_harness, fake_logging, monkeypatch):
    with make_harness(logs_budget_wait_seconds=0) as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()   # the Retry-After below is exact only if no real time passes meanwhile
        job = h.submit()
        fake_logging.add(numeric(job), "workerpool0-0", "hello")
        fake_logging.fail(429, "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'")
        url = f"/v1/jobs/{job['id']}/logs"
        r = h.client.get(url)
        assert r.status_code == 503 and r.headers["retry-after"] == "2"
        assert fake_logging.calls["list"] == 1                            # not retried into the quota
        r = h.client.get(url)
        assert r.status_code == 503 and fake_logging.calls["list"] == 1   # paused: Google not asked
        clock.advance(2)
        assert h.client.get(url).status_code == 200


@pytest.mark.slow
def test_followers_stay_within_the_quota_and_leave_room_for_people(make_harness, fake_vertex, fake_logging,
                                                                  monkeypatch):
    """Eight followers of one job poll every 0.1 s for 90 s while lines keep coming
    (what the SSE follow does today, one reader per follower): Google's quota is never
    exceeded, a person's page still answers, and every follower gets every line."""
    fake_logging.quota_per_minute = 60
    with make_harness(logging_reads_per_minute=30, logging_reads_burst=5, logs_follow_min_seconds=5,
                      logs_follow_max_seconds=30) as h:
        clock = h.use_clock(monkeypatch)
        job = running_job(h)
        handle = h.backend_handle(job["id"])
        backend = h.backend
        n = numeric(job)
        fake_logging.add(n, "workerpool0-0", "line 0")
        first = backend.read_logs(handle, replica=None, since=None, limit=1000)
        followers = 8
        cursors = [first.cursor] * followers
        seen = [[ln.message for ln in first.lines] for _ in range(followers)]
        written = 1
        calls = fake_logging.calls["list"]
        started = clock.monotonic()
        pages_ok = 0
        for step in range(1, 901):                                        # 90 s in steps of 0.1 s
            clock.advance(0.1)
            if step % 7 == 0:
                fake_logging.add(n, "workerpool0-0", f"line {written}", timestamp_ns=fake_logging.clock.now_ns())
                written += 1
            for i in range(followers):
                page = backend.read_logs(handle, replica=None, since=cursors[i], limit=1000)
                seen[i] += [ln.message for ln in page.lines]
                cursors[i] = page.cursor
            if step % 100 == 0:                                           # a person reads a page now and then
                r = h.client.get(f"/v1/jobs/{job['id']}/logs", params={"limit": 5})
                pages_ok += r.status_code == 200
        assert fake_logging.refused == 0                                  # never past Google's quota
        used = fake_logging.calls["list"] - calls
        # Followers have half the budget (15 a minute, 2 at once); the people's pages the rest.
        assert used <= (clock.monotonic() - started) * 15 / 60 + 2 + pages_ok
        assert pages_ok == 9
        for _ in range(60):                                               # lines stop; everyone catches up
            clock.advance(1)
            for i in range(followers):
                page = backend.read_logs(handle, replica=None, since=cursors[i], limit=1000)
                seen[i] += [ln.message for ln in page.lines]
                cursors[i] = page.cursor
        assert all(s == [f"line {k}" for k in range(written)] for s in seen)


def test_follow_interval_adapts_to_new_lines_quiet_and_followed_jobs(make_harness, fake_logging, monkeypatch):
    with make_harness(logging_reads_per_minute=30, logs_follow_min_seconds=5, logs_follow_max_seconds=30,
                      logs_follow_share=0.5) as h:
        clock = h.use_clock(monkeypatch)
        job = running_job(h)
        handle = h.backend_handle(job["id"])
        b = h.backend
        assert b.follow_interval(handle, caught_up=False, idle_seconds=0) == 0.0    # more to read: at once
        assert b.follow_interval(handle, caught_up=True, idle_seconds=0) == 5.0
        assert b.follow_interval(handle, caught_up=True, idle_seconds=30) == 15.0
        assert b.follow_interval(handle, caught_up=True, idle_seconds=600) == 30.0
        # Twelve jobs followed at once share 15 reads a minute: one read of each every 48 s.
        for _ in range(12):
            other = running_job(h)
            fake_logging.add(numeric(other), "workerpool0-0", "x", timestamp_ns=time.time_ns())
            b.read_logs(h.backend_handle(other["id"]), replica=None, since=None, limit=100)
            clock.advance(1)
        assert b.follow_interval(handle, caught_up=True, idle_seconds=0) == 48.0


def test_a_read_of_cloud_logging_holds_no_request_seat(make_harness, fake_logging):
    """A request reading a Vertex job's logs waits on Cloud Logging without its request seat
    (core/off_seat.py): the seat is given back before the read and taken again after it."""
    from service.core.off_seat import HOOK

    with make_harness() as h:
        job = h.submit()
        fake_logging.add(numeric(job), "workerpool0-0", "hello")
        calls: list[str] = []
        seen_by_google: list[list[str]] = []
        list_entries = fake_logging.calls

        def give_back() -> None:
            calls.append("off")
            seen_by_google.append([str(list_entries["list"])])

        hook = HOOK.set((give_back, lambda: calls.append("on")))
        try:
            page = h.backend.read_logs(h.backend_handle(job["id"]), replica=None, since=None, limit=100)
        finally:
            HOOK.reset(hook)
        assert [ln.message for ln in page.lines] == ["hello"]
        assert calls == ["off", "on"]
        assert seen_by_google == [["0"]]      # given back before Cloud Logging was asked
        assert fake_logging.calls["list"] == 1
