"""state.json is a contract with earlier versions of the service: a service restarted
after an upgrade must adopt the runs its predecessor started (test_local_restart.py).
These files are written exactly as the untyped code before RunState wrote them."""
from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from service.backends.local.rundir import STATE_VERSION, RunDir
from service.backends.local.runs import Run, RunState, read_state
from service.lifecycle.states import JobState

JOB = "6f1c0b1e-9a55-4c47-a1a4-0d3b4d2c9e10"

# A sandboxed run that failed, as launch.py and backend.py wrote it (keys and value shapes).
WRITTEN_BEFORE = {
    "job_id": JOB, "phase": "running", "launched_at": "2026-11-20T10:00:00.123456Z",
    "output_dir": f"/runs/{JOB}/output", "base_output_directory": "gs://bucket/run",
    "timeout_seconds": 3600.0, "host": "node-a", "uid": 450003, "stall_timeout_seconds": 120.0,
    "holder": {"pid": 4242, "create_time": 1763632800.5, "lock_fd": 17},
    "cgroup": f"/sys/fs/cgroup/trainjobs/{JOB}",
    "replicas": {
        "workerpool0-0": {"pool": 0, "index": 0, "tf_role": "chief", "address": "127.0.0.1:2222",
                          "pid": 5001, "create_time": 1763632801.25, "argv": ["/usr/bin/python3", "-m", "trainer.task"]},
        "workerpool1-0": {"pool": 1, "index": 0, "tf_role": "worker", "address": "127.0.0.1:2223",
                          "pid": 5002, "create_time": 1763632801.5, "argv": ["/usr/bin/python3", "-m", "trainer.task"]},
    },
    "cancel_requested_at": None,
    "outcome": {"state": "FAILED", "reason": "replica workerpool1-0 (worker 0) exited with code 3",
                "error": {"code": 3, "message": "The replica workerpool1-0 exited with a non-zero status of 3.",
                          "replica": "workerpool1-0", "exit_code": 3, "signal": None, "lost": False,
                          "log_tail": ["boom"]},
                "ended_at": "2026-11-20T10:05:00.000001Z"},
    "gone": True, "version": STATE_VERSION,
}


def test_a_state_file_written_before_the_typed_state_loads(tmp_path):
    rd = RunDir.of(tmp_path, uuid.UUID(JOB))
    rd.path.mkdir(parents=True)
    rd.state_file.write_text(json.dumps(WRITTEN_BEFORE, indent=1, sort_keys=True))
    state = read_state(rd)
    assert state is not None
    assert state.job_id == uuid.UUID(JOB) and state.phase == "running" and state.gone
    assert state.launched_at == datetime(2026, 11, 20, 10, 0, 0, 123456, tzinfo=UTC)
    assert state.holder is not None and (state.holder.pid, state.holder.lock_fd) == (4242, 17)
    assert state.replicas["workerpool1-0"].address == "127.0.0.1:2223"
    assert state.replicas["workerpool0-0"].argv == ["/usr/bin/python3", "-m", "trainer.task"]
    assert state.outcome is not None and state.outcome.state == JobState.FAILED
    assert state.outcome.error is not None and state.outcome.error["exit_code"] == 3
    run = Run.of_state(rd, state)
    assert run.holder == (4242, 1763632800.5) and run.uid == 450003 and run.timeout == 3600.0
    assert run.replicas["workerpool1-0"].pid == 5002 and run.replicas["workerpool1-0"].created == 1763632801.5


def test_the_typed_state_writes_back_the_same_keys_and_values(tmp_path):
    rd = RunDir.of(tmp_path, uuid.UUID(JOB))
    rd.path.mkdir(parents=True)
    Run.of_state(rd, RunState.from_json(WRITTEN_BEFORE)).save()
    assert json.loads(rd.state_file.read_text()) == WRITTEN_BEFORE


def test_an_early_state_file_with_fewer_keys_loads_and_keeps_unknown_ones(tmp_path):
    """Files from before hosts, uids, sandboxes and stall timeouts were recorded (and a key
    this version does not know, which must survive a rewrite)."""
    early = {"job_id": JOB, "phase": "launching", "launched_at": "2026-01-01T00:00:00.000000Z",
             "output_dir": None, "timeout_seconds": None, "cancel_requested_at": None, "outcome": None,
             "gone": False, "from_the_future": {"x": 1},
             "replicas": {"workerpool0-0": {"pool": 0, "index": 0, "tf_role": "chief", "pid": None,
                                            "create_time": None, "address": "127.0.0.1:1", "argv": []}}}
    state = RunState.from_json(early)
    assert state.phase == "launching" and state.holder is None and state.uid is None and state.host is None
    assert state.stall_timeout_seconds is None and state.cgroup is None and state.outcome is None
    assert state.replicas["workerpool0-0"].pid is None
    assert state.to_json()["from_the_future"] == {"x": 1}
