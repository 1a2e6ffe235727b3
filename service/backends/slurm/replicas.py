"""Each task's own process as its launcher recorded it (tasks/<task>.started, .exit), in
the shape the local backend gives the job view's `cluster[].status` (local/rundir.py
replica_status): PENDING (not started), RUNNING, then SUCCEEDED (exit 0), FAILED, or
STOPPED (ended by a signal the launcher forwarded: a cancel, the job's end)."""
from __future__ import annotations

from service.backends.slurm.runs import SlurmRun


def status(run: SlurmRun, task: str) -> dict:
    started, ended = run.task_record(task, "started") or {}, run.task_record(task, "exit")
    if ended is None:
        return {"state": "RUNNING" if started else "PENDING", "started_at": started.get("started_at")}
    code = ended.get("exit_code")
    state = "SUCCEEDED" if code == 0 else "STOPPED" if ended.get("terminated_by") else "FAILED"
    return {"state": state, "exit_code": code if isinstance(code, int) else None, "signal": ended.get("signal"),
            "started_at": started.get("started_at"), "ended_at": ended.get("ended_at")}
