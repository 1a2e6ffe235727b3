"""The fourth backend, written only in the test tree (issue 35, point 2): the proof that a
backend is one package plus one line. It runs each replica as a plain process of this host
(no sandbox, no uids: a test backend) in a run folder of its own, and reports facts only; the
lifecycle decides the rest (stalls, retries, states). Registered through the public registry
(service.backends.registry.register) by `entry`.

Its run folder, `<work_dir>/<job id>/`: `replicas.json` (task -> pid), `<task>.log` (the
replica's output), `<task>.exit` (its exit status, written last by wrapper.py), `cancel` (a
cancel was sent). Everything a restarted controller needs is there: it adopts by reading it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from service.core.errors import Invalid, Problem
from service.jobspec import CompiledJob
from service.lifecycle.protocol import (
    Backend,
    Capabilities,
    JobHandle,
    LaunchView,
    LogLine,
    LogPage,
    Observation,
    SubmitResult,
)
from service.lifecycle.states import JobState

WRAPPER = Path(__file__).with_name("wrapper.py")
S = JobState


@dataclass(frozen=True)
class FourthSettings:
    work_dir: Path


class FourthBackend(Backend):
    name = "fourth"

    def __init__(self, settings: FourthSettings) -> None:
        self.work_dir = settings.work_dir
        self.capabilities = Capabilities(host_bound=True, max_running=4, runs_on="the fourth backend's processes")

    # -- the controller's ------------------------------------------------------------------------
    def submit(self, job: JobHandle) -> SubmitResult:
        run = self._run(job.id)
        if (run / "replicas.json").exists():   # launched before a restart the database never heard of
            return SubmitResult(backend_ref=str(run), state=S.PENDING, reason="followed again")
        run.mkdir(parents=True, exist_ok=True)
        output = self._output(job.id, job.compiled)
        pids = {}
        for r in job.compiled.replicas:
            env = {**os.environ, **job.compiled.env(r, None, str(output))}
            command = [sys.executable if c == "python" else c for c in (*r.command, *r.args)]
            proc = subprocess.Popen([sys.executable, str(WRAPPER), str(run / f"{r.task_name}.exit"),
                                     str(run / f"{r.task_name}.log"), *command],
                                    env=env, start_new_session=True, stdin=subprocess.DEVNULL)
            pids[r.task_name] = proc.pid
        (run / "replicas.json").write_text(json.dumps(pids))
        return SubmitResult(backend_ref=str(run), state=S.PENDING, reason=f"started {len(pids)} processes")

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        return [obs for job in jobs if (obs := self._observe(job)) is not None]

    def _observe(self, job: JobHandle) -> Observation | None:
        run = self._run(job.id)
        if not (run / "replicas.json").exists():
            return None
        tasks = [r.task_name for r in job.compiled.replicas]
        exits = {t: int((run / f"{t}.exit").read_text()) for t in tasks if (run / f"{t}.exit").exists()}
        now = datetime.now(UTC)
        if len(exits) == len(tasks):
            if (run / "cancel").exists() and job.state == S.CANCELLING:
                return Observation(job.id, state=S.CANCELLED, reason="its processes were stopped", ended_at=now)
            failed = next(((t, c) for t, c in exits.items() if c != 0), None)
            if failed is None:
                return Observation(job.id, state=S.SUCCEEDED, reason="every replica exited 0", ended_at=now)
            task, code = failed
            message = f"The replica {task} exited with a non-zero status of {code}."
            return Observation(job.id, state=S.FAILED, reason=message, ended_at=now,
                               error={"code": code, "exit_code": code, "message": message, "replica": task,
                                      "source": self.name})
        if job.state in (S.QUEUED, S.PENDING):
            return Observation(job.id, state=S.RUNNING, backend_ref=str(run), started_at=now,
                               reason=f"{len(tasks)} processes running")
        if job.state == S.RUNNING and job.compiled.stall_timeout_seconds:
            started = (run / "replicas.json").stat().st_mtime
            silent = [(max(0.0, time.time() - max(started, self._mtime(run / f"{r.task_name}.log"))), r.task_name)
                      for r in job.compiled.replicas if r.tf_role in ("chief", "worker") and r.task_name not in exits]
            if silent:
                seconds, task = max(silent)
                return Observation(job.id, silence={"replica": task, "seconds": seconds})
        return None

    def cancel(self, job: JobHandle) -> JobState | None:
        run = self._run(job.id)
        if not (run / "replicas.json").exists():
            return S.CANCELLED
        (run / "cancel").touch()
        for pid in json.loads((run / "replicas.json").read_text()).values():
            try:
                os.kill(pid, signal.SIGTERM)   # the wrapper stops its command and records the status
            except ProcessLookupError:
                pass
        return None

    # -- every process's ---------------------------------------------------------------------------
    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        tasks = [r.task_name for r in job.compiled.replicas]
        if replica is not None and replica not in tasks:
            raise Invalid.of([Problem("replica", f"no replica {replica!r}", f"use one of: {', '.join(tasks)}")])
        offsets = _cursor(since)
        lines: list[LogLine] = []
        for task in [replica] if replica else tasks:
            path = self._run(job.id) / f"{task}.log"
            if not path.exists():
                continue
            with path.open("rb") as f:
                f.seek(offsets.get(task, 0))
                for raw in f:
                    if not raw.endswith(b"\n") or len(lines) >= limit:
                        break
                    offsets[task] = offsets.get(task, 0) + len(raw)
                    lines.append(LogLine(_encode(offsets), task, "stdout", datetime.now(UTC),
                                         raw.decode(errors="replace").rstrip("\n")))
        return LogPage(lines, _encode(offsets) if lines or since else None, more=len(lines) >= limit)

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        output = str(self._output(job_id, compiled))
        return LaunchView(compiled.custom_job_dict, {r.task_name: compiled.env(r, None, output)
                                                     for r in compiled.replicas},
                          tensorboard_dir=f"{output}/logs/", host_output_dir=f"{output}/")

    # -- where things are --------------------------------------------------------------------------
    def _run(self, job_id: uuid.UUID) -> Path:
        return self.work_dir / str(job_id)

    def _output(self, job_id: uuid.UUID, compiled: CompiledJob) -> Path:
        """A retry attempt writes where its first attempt did: it resumes from those checkpoints."""
        return self.work_dir / (compiled.output_of or str(job_id)) / "output"

    @staticmethod
    def _mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            return 0.0


def _cursor(since: str | None) -> dict[str, int]:
    if not since:
        return {}
    try:
        return {task: int(offset) for task, offset in (part.split("=") for part in since.split(";"))}
    except ValueError:
        raise Invalid.of([Problem("since", "not a cursor of this backend", "pass a cursor from a page")]) from None


def _encode(offsets: dict[str, int]) -> str:
    return ";".join(f"{task}={offset}" for task, offset in sorted(offsets.items()))
