"""The queue computed in a worker process (capacity/queue_process.py, queue_worker.py), not on
the API process's threads: what the readers are served, a worker that dies or hangs (never a
hang, never a 500 for a served reader: the last computation, or a 503 for one that must wait),
the worker's end with the app, and a waiting job newer than the served computation (a place that
says so, not null). Real subprocesses, both databases."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from service.capacity.planner import Planner
from service.slices import Settings
from tests.apikit import assert_problem
from tests.capacity.queuekit import add_template, set_capacity, submit
from tests.waiting import wait_for


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    # No controller: jobs stay QUEUED. A queue served for a minute unless a test clears it.
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=8, run_reconciler=False, seed_demo_template=False,
                    queue_cache_seconds=60)


def _local(body: dict) -> dict:
    [only] = body["items"]
    return only


def _stopped(pid: int) -> None:
    """Wait until the worker is really stopped (SIGSTOP is asynchronous)."""
    def state() -> bool:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    wait_for(state, f"worker {pid} to stop")


def test_the_api_process_computes_no_queue_its_worker_does(api_client, settings, tokens, monkeypatch):
    """Every read is answered, yet the planner is never asked in the API process (its snapshot
    would fail here): the worker, a process of its own, computed it; it ends with the app."""
    def refuse(*args, **kw):
        raise AssertionError("the queue was computed in the API process")
    monkeypatch.setattr(Planner, "snapshot", refuse)
    monkeypatch.setattr(Planner, "decide", refuse)
    with api_client(settings, tokens["admin"]) as c:
        add_template(c, {})
        job = submit(c, "waits")
        q = _local(c.get("/v1/queue").json())
        assert q["waiting_jobs"] == 1 and q["waiting"][0]["id"] == job
        assert c.get(f"/v1/jobs/{job}").json()["queue"]["position"] == 0
        cache = c.app.state.services.queue
        pid = cache.worker.pid
        assert pid is not None and pid != os.getpid() and cache.worker.started == 1
        # TRAINJOBS_QUEUE_WORKER_NICE (10): the requests of the API process come first
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
    assert cache.worker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                                 # reaped: gone with the app


def test_a_worker_killed_between_computations_is_replaced(api_client, settings, tokens, db_url):
    with api_client(settings, tokens["admin"]) as c:
        add_template(c, {})
        submit(c, "waits")
        assert _local(c.get("/v1/queue").json())["capacity"] == {}
        cache = c.app.state.services.queue
        dead = cache.worker._proc
        os.kill(dead.pid, signal.SIGKILL)
        wait_for(lambda: dead.poll() is not None, "the worker to die")
        set_capacity(db_url, "local", {"core": 3})
        cache.cache.clear()                             # as an operator's change does: the next read waits
        assert _local(c.get("/v1/queue").json())["capacity"] == {"core": 3}
        assert cache.worker.started == 2


def test_a_worker_dying_mid_computation_is_a_503_for_its_waiting_reader_only(api_client, settings, tokens, db_url):
    """The worker dies while a reader waits for its computation: that reader gets a 503 at once
    (not a hang, not a 500); a reader with a computation to be shown keeps it; the next read is
    answered by a new worker."""
    with api_client(settings, tokens["admin"]) as c:
        add_template(c, {})
        submit(c, "waits")
        first = c.get("/v1/queue").json()
        cache = c.app.state.services.queue
        pid = cache.worker.pid
        os.kill(pid, signal.SIGSTOP)
        _stopped(pid)
        set_capacity(db_url, "local", {"core": 3})
        cache.cache.clear()
        answers: list = []
        reader = threading.Thread(target=lambda: answers.append(c.get("/v1/queue")))
        reader.start()
        wait_for(lambda: cache._under_way is not None, "the computation to be asked of the worker")
        os.kill(pid, signal.SIGKILL)
        reader.join(60)
        assert not reader.is_alive()
        body = assert_problem(answers[0], 503)
        assert "could not be computed" in body["detail"] and answers[0].headers["Retry-After"] == "1"
        assert _local(c.get("/v1/queue").json())["capacity"] == {"core": 3}
        assert cache.worker.started == 2 and _local(first)["capacity"] == {}


def test_a_hung_worker_is_killed_after_the_compute_timeout(api_client, settings, tokens):
    """TRAINJOBS_QUEUE_COMPUTE_TIMEOUT_SECONDS: a worker that does not answer (stopped here) is
    killed after it, well before TRAINJOBS_QUEUE_WAIT_SECONDS; a served reader meanwhile gets the
    last computation; the next computation starts a new worker."""
    quick = settings.model_copy(update={"queue_compute_timeout_seconds": 5.0, "queue_cache_seconds": 0.2,
                                        "queue_wait_seconds": 60})
    with api_client(quick, tokens["admin"]) as c:
        add_template(c, {})
        submit(c, "waits")
        first = _local(c.get("/v1/queue").json())["computed_at"]
        cache = c.app.state.services.queue
        pid = cache.worker.pid
        os.kill(pid, signal.SIGSTOP)
        _stopped(pid)
        wait_for(lambda: c.get("/v1/queue").status_code == 200 and cache._under_way is not None,
                 "a refresh asked of the stopped worker")
        assert _local(c.get("/v1/queue").json())["computed_at"] == first    # served the last one meanwhile
        wait_for(lambda: _local(c.get("/v1/queue").json())["computed_at"] != first,
                 "a fresh computation, by a new worker", timeout=60)
        assert cache.worker.started >= 2
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)                             # the stopped worker was killed and reaped


def test_the_worker_settings_are_bounded(db_url, tmp_path):
    from pydantic import ValidationError
    base = {"database_url": db_url, "local_work_dir": tmp_path}
    assert (Settings(**base).queue_compute_timeout_seconds, Settings(**base).queue_worker_nice) == (120.0, 10)
    for name, bad in (("queue_compute_timeout_seconds", 0), ("queue_compute_timeout_seconds", 3601),
                      ("queue_worker_nice", -1), ("queue_worker_nice", 20)):
        with pytest.raises(ValidationError):
            Settings(**base, **{name: bad})


def test_a_job_newer_than_the_served_queue_says_so_not_null(api_client, settings, tokens):
    """Submitted after the served computation began: its view's place has no position yet, says
    why, and when the queue it was read from was computed; a later computation places it."""
    with api_client(settings.model_copy(update={"queue_cache_seconds": 0.3}), tokens["admin"]) as c:
        add_template(c, {})
        submit(c, "first")
        computed_at = _local(c.get("/v1/queue").json())["computed_at"]
        cache = c.app.state.services.queue
        cache.next_start = cache.clock() + 3600         # no refresh meanwhile: the served one stays
        later = submit(c, "later")
        place = c.get(f"/v1/jobs/{later}").json()["queue"]
        assert place is not None and place["position"] is None and place["ahead"] is None
        assert place["computed_at"] == computed_at
        assert "not yet in the queue computed at" in place["why"]
        cache.next_start = 0.0
        with cache._cond:
            cache._cond.notify_all()
        wait_for(lambda: c.get(f"/v1/jobs/{later}").json()["queue"]["position"] is not None,
                 "the next computation to place it")


def test_the_worker_plays_the_policy_the_api_process_sends(api_client, settings, tokens, db_url):
    """The worker hears no controller pass: each request carries the API process's policy as its
    passes told it (capacity/passes.py), and the worker decides with that one (here a starvation
    limit of 0 puts the waiting job in the `starving` tier)."""
    import dataclasses
    import uuid

    from service.capacity.queue_process import QueueProcess
    from service.capacity.settings import CapacitySettings
    from service.scheduling.model import Policy
    with api_client(settings, tokens["admin"]) as c:
        add_template(c, {})
        job = uuid.UUID(submit(c, "waits"))
    worker = QueueProcess(db_url, CapacitySettings(), timeout_seconds=60)
    try:
        plain = worker.compute("local", 8, Policy()).place(job, None)
        starving = worker.compute("local", 8, dataclasses.replace(Policy(), starve_after_s=0.0)).place(job, None)
    finally:
        worker.close()
    assert plain is not None and starving is not None and worker.started == 1
    assert plain.factors.tier != "starving" and starving.factors.tier == "starving"


def test_the_worker_imports_no_web_app_and_no_tensorflow():
    """What `python -m service.capacity.queue_worker` loads: the capacity domain, the scheduler
    and SQLAlchemy; not the web framework, not TensorFlow (the API process's rule)."""
    import subprocess
    import sys
    code = ("import sys, service.capacity.queue_worker; "
            "print(sorted(m for m in ('tensorflow', 'fastapi', 'starlette', 'service.app') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
