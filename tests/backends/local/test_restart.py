"""Restart safety: the service is a real OS process, killed with SIGKILL while
local jobs run; a new service over the same database and work dir must follow
the survivors again and give the others a final state that says what happened."""
from __future__ import annotations

import signal
import uuid

import httpx

from service.backends.local import LocalBackend
from service.backends.local.entry import local_settings_of
from service.backends.local.processes import MARKER
from service.backends.local.rundir import RunDir
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState
from tests.backends.localkit import (
    Api,
    ServiceProcess,
    assert_no_processes,
    handle,
    job_processes,
    kill_all,
    run_path,
    settings_for,
    spec,
)
from tests.conftest import bearer
from tests.waiting import wait_for

GATED = {"name": "gate", "type": "string"}


def test_kill_9_then_restart_follows_survivors_and_ends_the_rest(db_url, work_dir, token, tmp_path):
    settings = settings_for(db_url, work_dir, local_max_running_jobs=4, local_cancel_grace_seconds=2.0)
    first = ServiceProcess(settings, tmp_path / "service-1.log")
    second = None
    try:
        first.wait_ready()
        api = Api(httpx.Client(base_url=first.url, headers=bearer(token), timeout=30))
        api.template("gated", spec(["--wait-file", "${gate}"], workers=["--wait-file", "${gate}"]),
                     parameters=[GATED])
        gates = {name: tmp_path / f"gate-{name}" for name in ("alive", "killed", "finished")}
        jobs = {name: api.submit("gated", parameters={"gate": str(g)})["id"] for name, g in gates.items()}
        for job_id in jobs.values():
            api.wait_state(job_id, "RUNNING")
            wait_for(lambda: len(job_processes(work_dir, job_id)) == 4, "2 wrappers and 2 replicas")

        first.kill9()
        # The replicas outlive the service...
        for job_id in jobs.values():
            assert len(job_processes(work_dir, job_id)) == 4
        # ...and while it is down, one job is killed outright and another finishes.
        for p in job_processes(work_dir, jobs["killed"]):
            p.send_signal(signal.SIGKILL)
        gates["finished"].touch()
        # (Their sandboxes' inits wait for the next service, which stops them: checked at the end.)
        assert_no_processes(work_dir, jobs["killed"], inits=False)
        assert_no_processes(work_dir, jobs["finished"], inits=False)

        second = ServiceProcess(settings, tmp_path / "service-2.log")
        second.wait_ready()
        api = Api(httpx.Client(base_url=second.url, headers=bearer(token), timeout=30))

        finished = api.wait_state(jobs["finished"], "SUCCEEDED", "FAILED")
        assert finished["state"] == "SUCCEEDED"
        assert "while the service was not running" in api.events(jobs["finished"])[-1]["reason"]

        killed = api.wait_state(jobs["killed"], "FAILED", "SUCCEEDED")
        assert killed["state"] == "FAILED"
        reason = api.events(jobs["killed"])[-1]["reason"]
        assert "without an exit status" in reason and "while the service was not running" in reason
        assert killed["error"]["replica"] in ("workerpool0-0", "workerpool1-0")

        # The survivor is followed again: still RUNNING, its processes untouched...
        assert api.job(jobs["alive"])["state"] == "RUNNING"
        assert len(job_processes(work_dir, jobs["alive"])) == 4
        # ...and it ends normally once its replicas do.
        gates["alive"].touch()
        assert api.wait_state(jobs["alive"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
        lines = api.all_logs(jobs["alive"])
        assert {ln["replica"] for ln in lines} == {"workerpool0-0", "workerpool1-0"}
        assert_no_processes(work_dir)
    finally:
        for service in (first, second):
            if service is not None:
                service.stop()


def test_a_launch_cut_short_by_a_crash_is_cleaned_up(tmp_path):
    """The service died between starting a replica and recording its pid: the new
    service finds the process by its marker, stops it and fails the job."""
    import json
    import subprocess
    import sys

    work_dir = tmp_path / "runs"
    job_id = uuid.uuid4()
    rd = RunDir.of(work_dir, job_id)
    rd.create()
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                             env={MARKER: f"{job_id}/workerpool0-0"})
    try:
        rd.write_state({"job_id": str(job_id), "phase": "launching", "launched_at": "2026-01-01T00:00:00.000000Z",
                        "output_dir": None, "timeout_seconds": None, "cancel_requested_at": None,
                        "outcome": None, "gone": False,
                        "replicas": {"workerpool0-0": {"pool": 0, "index": 0, "tf_role": "chief", "pid": None,
                                                       "create_time": None, "address": "127.0.0.1:1", "argv": []}}})
        backend = LocalBackend(local_settings_of(settings_for("sqlite://", work_dir)))
        backend.start_client()
        backend.start_controller()
        try:
            obs = backend.poll([handle(job_id, JobState.RUNNING, ["--exit", "0"])])
            assert [o.state for o in obs] == [JobState.FAILED]
            assert "while starting" in obs[0].reason
            stray.wait(30)  # killed by the new service (and reaped here, its parent)
            assert stray.returncode == -signal.SIGKILL
            assert json.loads(rd.state_file.read_text())["outcome"]["state"] == "FAILED"
        finally:
            backend.close()
    finally:
        if stray.poll() is None:
            stray.kill()


def test_a_job_whose_run_folder_is_gone_fails_with_a_reason(tmp_path):
    backend = LocalBackend(local_settings_of(settings_for("sqlite://", tmp_path / "runs")))
    backend.start_client()
    backend.start_controller()
    try:
        job_id = uuid.uuid4()
        obs = backend.poll([handle(job_id, JobState.RUNNING, ["--exit", "0"])])
        assert [o.state for o in obs] == [JobState.FAILED]
        assert "run folder" in obs[0].reason and str(job_id) in obs[0].reason
    finally:
        backend.close()


def test_close_leaves_replicas_running_for_the_next_start(tmp_path):
    """A graceful stop keeps local jobs running too: the next backend follows them."""
    work_dir = tmp_path / "runs"
    gate = tmp_path / "gate"
    job_id = uuid.uuid4()
    first = LocalBackend(local_settings_of(settings_for("sqlite://", work_dir)))
    first.start_client()
    first.start_controller()
    queued = handle(job_id, JobState.QUEUED, ["--wait-file", str(gate)])
    result = first.submit(queued)
    assert result.state == JobState.PENDING and run_path(result.backend_ref).name == str(job_id)
    wait_for(lambda: len(job_processes(work_dir, str(job_id))) == 2, "wrapper and replica")
    first.close()
    assert len(job_processes(work_dir, str(job_id))) == 2

    second = LocalBackend(local_settings_of(settings_for("sqlite://", work_dir)))
    second.start_client()
    second.start_controller()
    try:
        running = JobHandle(id=job_id, state=JobState.RUNNING, backend_ref=result.backend_ref,
                            compiled=queued.compiled, created_at=queued.created_at)
        assert [o.state for o in second.poll([running])] == []  # still running: no news
        gate.touch()

        def outcome():
            return [o for o in second.poll([running]) if o.state is not None]
        obs = wait_for(outcome, "the followed job to end")
        assert [o.state for o in obs] == [JobState.SUCCEEDED]
        assert_no_processes(work_dir)
    finally:
        second.close()
        kill_all(work_dir)  # a failed assertion must not leave the replica behind
