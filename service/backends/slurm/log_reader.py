"""Reading a Slurm job's per-task logs, its progress and the silence of its tasks.

The launcher writes each task's log in the local wrapper's record format, so the
shared reader (service.backends.replica_logs) serves both: the same cursors,
the same merge by time, the same tail. Progress lines are the trainer's, read from the
chief's and evaluator's logs as for local jobs."""
from __future__ import annotations

import os
import time

from service.backends import progress, replica_logs
from service.backends.slurm.runs import SlurmRun
from service.core.errors import Invalid, Problem
from service.jobspec import CompiledJob
from service.lifecycle.protocol import LogPage

TAIL_LINES = 20


def tasks_of(compiled: CompiledJob) -> list[str]:
    return [r.task_name for r in compiled.replicas if r.tf_role is not None]


def read_page(run: SlurmRun, compiled: CompiledJob, replica: str | None, since: str | None, limit: int) -> LogPage:
    tasks = tasks_of(compiled)
    if replica is not None:
        if replica not in tasks:
            raise Invalid.of([Problem("replica", f"this job has no replica {replica!r}",
                                      f"use one of: {', '.join(tasks)}")])
        tasks = [replica]
    return replica_logs.read_page({t: run.log(t) for t in tasks}, since, limit)


def tail(run: SlurmRun, task: str) -> list[str]:
    return [line[:500] for line in replica_logs.tail(run.log(task), TAIL_LINES)]


def batch_tail(run: SlurmRun, n: int = TAIL_LINES, max_bytes: int = 16 * 1024) -> list[str]:
    """The last lines of the batch script's own output (Slurm's --output: srun's errors, a
    launcher that could not start), for a failure no task's exit record explains."""
    try:
        fd = os.open(run.batch_output, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        data = f.read()
    lines = data.decode("utf-8", "replace").splitlines()
    if size > max_bytes:
        lines = lines[1:]
    return [line[:500] for line in lines if line.strip()][-n:]


class ProgressFollower:
    """Each job's progress so far and how far its chief's and evaluator's logs were read.
    Kept in memory: after a restart the logs are read again from the start (cheap: a
    chunk per pass), which gives the same progress."""

    def __init__(self) -> None:
        self._state: dict[str, tuple[dict | None, dict[str, int]]] = {}

    def read(self, job_id: str, run: SlurmRun, compiled: CompiledJob, *, to_end: bool) -> dict | None:
        """The new progress, or None when nothing changed."""
        prog, offsets = self._state.get(job_id, (None, {}))
        changed = False
        for r in compiled.replicas:
            if r.tf_role not in ("chief", "evaluator"):
                continue
            offset = offsets.get(r.task_name, 0)
            while True:
                start = offset
                for ts, _stream, message, end in replica_logs.read_records(run.log(r.task_name), offset,
                                                                         replica_logs.READ_CHUNK):
                    offset = end
                    new = progress.update(prog, message, ts, r.tf_role)
                    if new is not None:
                        prog, changed = new, True
                if not to_end or offset == start:
                    break
            offsets[r.task_name] = offset
        self._state[job_id] = (prog, offsets)
        return prog if changed else None

    def forget(self, job_id: str) -> None:
        self._state.pop(job_id, None)

    def clear(self) -> None:
        self._state.clear()


def silence(run: SlurmRun, compiled: CompiledJob, started_at: float) -> dict | None:
    """Observation.silence: the longest any chief or worker still running has written nothing
    (progress lines are output too). Parameter servers and the evaluator wait quietly by design."""
    files = {r.task_name: run.log(r.task_name) for r in compiled.replicas
             if r.tf_role in ("chief", "worker") and run.task_record(r.task_name, "exit") is None}
    return replica_logs.silence(files, started_at, time.time()) if files else None
