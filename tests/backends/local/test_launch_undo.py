"""The local launch undoes itself (issue 35, point 6): every step that fails before the run is
entered undoes what the steps before it made, in reverse order (one ExitStack): the wrappers
killed, state.json removed, the job's cgroup removed, the uid's lock let go. Each step is made
to fail for real (an OSError where the step would raise one), and then the same job launches."""
from __future__ import annotations

import fcntl
import os
import uuid

import pytest

from service.backends.local import cgroup, sandbox
from service.backends.local.backend import LocalBackend
from service.backends.local.entry import local_settings_of
from service.backends.local.rundir import RunDir
from service.backends.local.runs import Run
from service.lifecycle.states import JobState
from tests.backends.localkit import assert_no_processes, handle, settings_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uids, cgroups and the sandbox exist only as root")


def _refuse(*_a, **_k):
    raise OSError(28, "No space left on device (made to fail by the test)")


@pytest.fixture
def made(monkeypatch) -> dict:
    """What the launch made: the uid, the cgroup, the wrappers."""
    seen: dict = {"wrappers": []}
    create, spawn = cgroup.create, sandbox.spawn_wrapper

    def recording_create(*a, **k):
        seen["cgroup"] = create(*a, **k)
        return seen["cgroup"]

    def recording_spawn(*a, **k):
        popen = spawn(*a, **k)
        seen["wrappers"].append(popen)
        return popen
    monkeypatch.setattr(cgroup, "create", recording_create)
    monkeypatch.setattr(sandbox, "spawn_wrapper", recording_spawn)
    return seen


@pytest.mark.parametrize("step", ["cgroup", "state", "sandbox", "sandbox ready"])
def test_a_failed_step_undoes_the_launch_and_the_job_launches_afterwards(tmp_path, work_dir, monkeypatch, made,
                                                                        step):
    backend = LocalBackend(local_settings_of(settings_for(f"sqlite:///{tmp_path}/x.db", work_dir)))
    backend.start_client()
    assert backend.sandboxed
    acquire = backend.launcher.uids.acquire
    uids: list[int] = []
    monkeypatch.setattr(backend.launcher.uids, "acquire", lambda: uids.append((got := acquire())[0]) or got)
    target = {"cgroup": (cgroup, "create"), "state": (Run, "save"), "sandbox": (sandbox, "begin_holder"),
              "sandbox ready": (sandbox, "holder_ready")}[step]
    original = getattr(*target)
    monkeypatch.setattr(*target, _refuse)
    job = handle(uuid.uuid4(), JobState.QUEUED, ["--exit", "0"])
    try:
        with pytest.raises(OSError, match="made to fail"):
            backend.launcher.launch(job, backend.supervisor.runs)
        assert not RunDir.of(work_dir, job.id).state_file.exists()
        assert job.id not in backend.supervisor.runs
        if "cgroup" in made:
            assert not made["cgroup"].exists()
        assert made["wrappers"] == [] if step != "sandbox ready" else all(p.poll() is not None for p in made["wrappers"])
        with open(backend.launcher.uids.lock_dir / str(uids[0]), "a") as lock:   # let go: anyone may take it
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)

        monkeypatch.setattr(*target, original)
        run = backend._launch(job)
        assert run.outcome is None and RunDir.of(work_dir, job.id).state_file.exists()
        backend.supervisor.request_cancel(run)
    finally:
        backend.supervisor.start()   # its watcher stops what is left
        assert_no_processes(work_dir, str(job.id))
        backend.close()
