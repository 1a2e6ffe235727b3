"""Point 2 of issue 26: stall detection for Vertex jobs from their chief's and workers' log
lines, read with the progress query (one entries.list for all running jobs), within the
Cloud Logging budget. A replica silent for longer than `scheduling.stall_timeout_seconds`
fails the job naming it (the controller decides), within the timeout plus one read
interval, and its CustomJob is cancelled. Parameter servers and the evaluator are not
judged; time not covered by a successful read never counts. Time moves on the fakes'
clock, never by sleeping."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.demo import demo_template
from tests.fakes import filters
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures

STALL = 120
INTERVAL = 30


def template(h, name: str = "stall-ps", stall: int | None = STALL, evaluator: bool = True) -> str:
    body = demo_template().model_dump(mode="json", exclude_none=True)
    spec = body["spec"]
    body["name"] = name
    spec["distribution"] = "parameter_server"
    spec["workers"]["replica_count"] = 2
    spec["parameter_servers"] = {"machine_type": "n1-standard-4", "replica_count": 1}
    if evaluator:
        spec["evaluator"] = {"machine_type": "n1-standard-4", "replica_count": 1}
    spec["scheduling"] = {"timeout_seconds": 3600, **({"stall_timeout_seconds": stall} if stall else {})}
    r = h.client.post("/v1/templates", json=body)
    assert r.status_code == 201, r.text
    return name


def numeric(job: dict) -> str:
    return job["backend_ref"].rsplit("/", 1)[1]


def start(h, name: str, clock=None, pending_for: float = 0) -> dict:
    job = h.submit(template=name)
    if pending_for:
        h.fake.set_state(job["id"], "JOB_STATE_PENDING")
        clock.advance(pending_for)
        h.reconcile()
    h.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    h.reconcile()
    job = h.job(job["id"])
    assert job["state"] == "RUNNING"
    return job


def chatter(h, job: dict, tasks: list[str], clock) -> None:
    for task in tasks:
        h.logs.add(numeric(job), task, f"step on {task}", timestamp_ns=clock.now_ns())


ALL = ["workerpool0-0", "workerpool1-0", "workerpool1-1"]


def run(h, clock, seconds: int, step: int, job: dict, talking: list[str]) -> None:
    """`seconds` of a job whose `talking` replicas log every `step` s, a pass every step."""
    for _ in range(seconds // step):
        clock.advance(step)
        chatter(h, job, talking, clock)
        h.reconcile()


def test_a_silent_worker_fails_the_job_naming_it_and_its_customjob_is_cancelled(make_harness, monkeypatch):
    with make_harness(vertex_progress_interval_seconds=INTERVAL) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h))
        reads = h.logs.calls["list"]
        # Everyone talks for 5 minutes, parameter server and evaluator never: no stall.
        run(h, clock, 300, 10, job, ALL)
        assert h.job(job["id"])["state"] == "RUNNING"
        assert h.logs.calls["list"] - reads <= 300 // INTERVAL + 1     # one query per interval, as before
        (f,) = set(h.logs.filters[-1:])
        assert 'resource.labels.task_name:"workerpool1-"' in f and f'resource.labels.job_id="{numeric(job)}"' in f
        # workerpool1-1 falls silent (its last line is the one just read): FAILED naming it,
        # within the timeout plus one read interval (plus this test's pass step: the service's
        # own loop passes every 0.5 s; and some real time, as the fakes' clock is real time
        # plus the offset tests add).
        last_line = max(e["timestamp"] for e in h.logs.entries if e["resource"]["labels"]["task_name"] == "workerpool1-1")
        silent_from = filters.timestamp_ns(last_line)
        step = 5
        for _ in range((STALL + INTERVAL) // step + 2):
            clock.advance(step)
            chatter(h, job, ["workerpool0-0", "workerpool1-0"], clock)
            h.reconcile()
            if h.job(job["id"])["state"] != "RUNNING":
                break
        done = h.job(job["id"])
        assert done["state"] == "FAILED"
        ended = datetime.fromisoformat(done["ended_at"].replace("Z", "+00:00"))
        failed_at = int(ended.replace(tzinfo=ended.tzinfo or UTC).timestamp() * 1e9)
        assert STALL < (failed_at - silent_from) / 1e9 <= STALL + INTERVAL + step + 5, done["error"]
        assert done["error"]["replica"] == "workerpool1-1" and done["error"]["code"] == 4
        assert "stall_timeout_seconds" in done["error"]["message"] and "workerpool1-1" in done["error"]["message"]
        assert h.events(job["id"])[-1]["to_state"] == "FAILED"
        assert h.fake.get(job["id"])["state"] == "JOB_STATE_CANCELLING"     # the CustomJob was told to stop
        assert h.fake.calls["cancel"] == 1


def test_a_replica_that_never_logged_counts_from_running(make_harness, monkeypatch):
    with make_harness(vertex_progress_interval_seconds=INTERVAL) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h), clock, pending_for=3600)   # waited an hour for machines:
        assert h.fake.get(job["id"])["startTime"] > h.fake.get(job["id"])["createTime"]  # only RUNNING counts
        run(h, clock, STALL - 10, 10, job, ["workerpool0-0", "workerpool1-0"])
        assert h.job(job["id"])["state"] == "RUNNING"
        run(h, clock, INTERVAL + 20, 10, job, ["workerpool0-0", "workerpool1-0"])
        done = h.job(job["id"])
        assert done["state"] == "FAILED" and done["error"]["replica"] == "workerpool1-1"


def test_silence_during_skipped_reads_is_never_counted(make_harness, monkeypatch):
    """Cloud Logging answers 429 (then 503) for longer than the timeout: nobody saw the
    replicas, so nothing fails; once reads succeed again, lines written meanwhile show
    the replicas were alive."""
    with make_harness(vertex_progress_interval_seconds=INTERVAL, google_backoff_max_seconds=5) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h))
        run(h, clock, 60, 10, job, ALL)
        h.logs.fail(429, "Quota exceeded", times=10)
        h.logs.fail(503, times=10)
        reads_before = h.logs.calls["list"]
        for _ in range(3 * STALL // 10):    # 6 minutes: lines written, none read
            clock.advance(10)
            chatter(h, job, ALL, clock)
            h.reconcile()
        assert h.logs.calls["list"] > reads_before                    # reads were attempted and refused
        assert h.job(job["id"])["state"] == "RUNNING"
        assert h.fake.calls["cancel"] == 0
        run(h, clock, 3 * STALL, 10, job, ALL)                          # reads succeed again
        assert not h.logs._faults
        assert h.job(job["id"])["state"] == "RUNNING"


def test_skipped_reads_then_real_silence_still_fail(make_harness, monkeypatch):
    """Time covered later from Cloud Logging's stored entries counts: a worker silent through
    an outage and after it is judged once reads come back."""
    with make_harness(vertex_progress_interval_seconds=INTERVAL, google_backoff_max_seconds=5) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h))
        run(h, clock, 60, 10, job, ALL)
        h.logs.fail(503, times=200)
        run(h, clock, 2 * STALL, 10, job, ["workerpool0-0", "workerpool1-1"])
        assert h.job(job["id"])["state"] == "RUNNING"                 # not observed: not judged
        h.logs._faults.clear()
        run(h, clock, INTERVAL + 10, 10, job, ["workerpool0-0", "workerpool1-1"])
        done = h.job(job["id"])
        assert done["state"] == "FAILED" and done["error"]["replica"] == "workerpool1-0"


def test_parameter_servers_and_the_evaluator_are_not_judged_nor_jobs_without_a_timeout(make_harness, monkeypatch):
    with make_harness(vertex_progress_interval_seconds=INTERVAL) as h:
        clock = h.use_clock(monkeypatch)
        judged = start(h, template(h))
        free = start(h, template(h, "no-stall", stall=None))
        for _ in range(4 * STALL // 10):
            clock.advance(10)
            chatter(h, judged, ALL, clock)             # ps (workerpool2-0), evaluator (workerpool3-0) silent
            h.reconcile()
        assert h.job(judged["id"])["state"] == "RUNNING"
        assert h.job(free["id"])["state"] == "RUNNING"    # nobody logs, but no stall timeout
        f = h.logs.filters[-1]
        assert f'resource.labels.job_id="{numeric(free)}"' in f            # its progress is still read
        assert f.count(f'resource.labels.job_id="{numeric(free)}"') == 1    # but not its every line
        assert f.count(f'resource.labels.job_id="{numeric(judged)}"') == 1     # each job named once
        watched_group = f[f.index(f'resource.labels.job_id="{numeric(judged)}"'):]
        assert watched_group.index('task_name:"workerpool1-"') < watched_group.index("timestamp>=")
        assert f'resource.labels.job_id="{numeric(free)}"' not in watched_group


@pytest.mark.parametrize("cancel_status", [503])
def test_a_cancel_that_does_not_go_out_keeps_the_job_running_until_it_does(make_harness, monkeypatch, cancel_status):
    with make_harness(vertex_progress_interval_seconds=INTERVAL) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h))
        h.fake.fail("cancel", cancel_status, times=1)
        for _ in range((STALL + INTERVAL) // 10 + 1):
            clock.advance(10)
            chatter(h, job, ["workerpool1-0", "workerpool1-1"], clock)    # the chief is silent
            h.reconcile()
            if h.fake.calls["cancel"]:
                break
        assert h.fake.calls["cancel"] >= 1
        assert h.job(job["id"])["state"] == "RUNNING"      # the cancel failed: not FAILED yet
        clock.advance(10)
        h.reconcile()
        done = h.job(job["id"])
        assert done["state"] == "FAILED" and done["error"]["replica"] == "workerpool0-0"
        assert h.fake.get(job["id"])["state"] == "JOB_STATE_CANCELLING"


def test_a_read_cut_short_by_the_page_cap_covers_only_what_it_read(make_harness, monkeypatch):
    """Lines beyond the page cap are not read yet: the time they cover is not silence."""
    with make_harness(vertex_progress_interval_seconds=INTERVAL) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h))
        base = clock.now_ns()
        for k in range(1, 30):                       # every replica, every 10 s, for 290 s
            for task in ALL:
                h.logs.add(numeric(job), task, f"step {k}", timestamp_ns=base + k * 10_000_000_000)
        h.logs.max_page_size = 5                    # 5 pages of 5: a read gets 25 of the 87 lines
        clock.advance(300)
        reads = h.logs.calls["list"]
        h.reconcile()
        assert h.logs.calls["list"] - reads == 5    # cut short by the cap
        assert h.job(job["id"])["state"] == "RUNNING"
        covered = h.backend.progress._jobs[job["id"]].covered_to
        assert (covered.timestamp() * 1e9 - base) / 1e9 < 100     # up to what was read, not "now"
        for _ in range(3):                                          # the next reads catch up
            clock.advance(INTERVAL)
            h.reconcile()
        assert h.job(job["id"])["state"] == "RUNNING"


def test_a_cancel_refused_for_good_still_fails_the_job_and_its_lines_are_no_longer_read(make_harness, monkeypatch):
    with make_harness(vertex_progress_interval_seconds=INTERVAL) as h:
        clock = h.use_clock(monkeypatch)
        job = start(h, template(h))
        h.fake.fail("cancel", 403, "Permission 'aiplatform.customJobs.cancel' denied", times=1)
        run(h, clock, STALL + INTERVAL + 10, 10, job, ["workerpool0-0", "workerpool1-0"])
        done = h.job(job["id"])
        assert done["state"] == "FAILED" and done["error"]["replica"] == "workerpool1-1"
        assert h.fake.calls["cancel"] == 1
        followed = h.backend.progress._jobs.get(job["id"])    # no longer judged: read a last few times
        assert followed is None or (not followed.watch and followed.final_reads is not None)
        assert h.backend.progress.silence(job["id"]) is None
