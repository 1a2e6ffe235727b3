"""Issue 47.5: a restart keeps a preemption a preemption. The service stops while a preempted
job's replica ignores SIGTERM; the next backend follows the run and stops it as the preemption it
was (its words, its grace's deadline as first set, not a cancel's grace counted again from the
restart), and once the job has ended no replica's status says RUNNING."""
from __future__ import annotations

import time
import uuid

from service.backends.local import LocalBackend
from service.backends.local.entry import local_settings_of
from service.backends.local.rundir import RunDir
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState
from tests.backends.localkit import assert_no_processes, handle, job_processes, kill_all, settings_for
from tests.waiting import wait_for

GRACE = 4.0


def _backend(work_dir) -> LocalBackend:
    backend = LocalBackend(local_settings_of(settings_for("sqlite://", work_dir, local_cancel_grace_seconds=60.0)))
    backend.start_client()
    backend.start_controller()
    return backend


def test_a_preemption_under_way_survives_a_restart(tmp_path):
    work_dir = tmp_path / "runs"
    job_id = uuid.uuid4()
    first = _backend(work_dir)
    queued = handle(job_id, JobState.QUEUED, ["--ignore-sigterm", "--wait-file", str(tmp_path / "never")])
    try:
        result = first.submit(queued)
        running = JobHandle(id=job_id, state=JobState.RUNNING, backend_ref=result.backend_ref,
                            compiled=queued.compiled, created_at=queued.created_at)
        log = RunDir.of(work_dir, job_id).log("workerpool0-0")
        # It says hello once its SIGTERM handler is in place (a SIGTERM before would end it).
        wait_for(lambda: log.exists() and "hello from" in log.read_text(), "the replica's hello")
        asked = time.monotonic()
        first.preempt(running, GRACE)
        first.close()                              # the service goes; the replica ignores SIGTERM
        assert len(job_processes(work_dir, str(job_id))) == 2, "the replica outlives the service"

        second = _backend(work_dir)
        try:
            def ended():
                return [o for o in second.poll([running]) if o.state is not None]
            obs = wait_for(ended, "the preempted job to end after the restart", 30)
            took = time.monotonic() - asked
            # SIGKILL at the preemption's deadline (4 s after it was asked), not the cancel grace
            # (60 s here) from the restart.
            assert took < 20, took
            assert [o.state for o in obs] == [JobState.CANCELLED]
            assert obs[0].error["message"] == "CANCELLED: the job was preempted", obs[0].error
            assert obs[0].reason.startswith("preempted: every replica was stopped"), obs[0].reason
            view = second.launch_view(job_id, queued.compiled, result.backend_ref)
            assert {r["state"] for r in view.replicas.values()} == {"STOPPED"}, view.replicas
            assert_no_processes(work_dir)
        finally:
            second.close()
    finally:
        kill_all(work_dir)
