"""A local run folder: the backend's truth on disk, so a restarted service can
find its jobs' processes again.

    <local_work_dir>/<job id>/
        state.json                  pids, process start times, ports, output dir, outcome
        logs/<task>.log             the replica's stdout and stderr (format: wrapper.py)
        replicas/<task>.started     written by the wrapper once the command runs
        replicas/<task>.exit        written by the wrapper when the command ends
        replicas/<task>.wrapper     the wrapper's own stderr (empty unless it broke)
        output/                     the job's base output directory (AIP_MODEL_DIR=output/model/ ...)
        work/                       the replicas' working directory; HOME is work/home, TMPDIR work/tmp

When replicas run as the job's own uid (the service is root), work/ and output/
are theirs (0700) and everything else stays the service's: a replica can neither
read another job's folder nor forge its own log or exit record.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

STATE_VERSION = 1


@dataclass(frozen=True)
class RunDir:
    # Frozen, so the folders derived from `path` are computed once per RunDir
    # (cached_property): the job view renders every replica's env with them.
    path: Path

    @classmethod
    def of(cls, work_dir: Path, job_id: uuid.UUID) -> RunDir:
        return cls(work_dir / str(job_id))

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def replicas(self) -> Path:
        return self.path / "replicas"

    @cached_property
    def output(self) -> Path:
        return self.path / "output"

    @cached_property
    def work(self) -> Path:
        return self.path / "work"

    @cached_property
    def home(self) -> Path:
        return self.work / "home"

    @cached_property
    def tmp(self) -> Path:
        return self.work / "tmp"

    def log(self, task: str) -> Path:
        return self.logs / f"{task}.log"

    def started_file(self, task: str) -> Path:
        return self.replicas / f"{task}.started"

    def exit_file(self, task: str) -> Path:
        return self.replicas / f"{task}.exit"

    def wrapper_log(self, task: str) -> Path:
        return self.replicas / f"{task}.wrapper"

    def create(self, uid: int | None = None) -> None:
        from service.backends.local.isolation import own_dir

        self.path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path, 0o711)  # the job's uid passes through to work/ and output/, lists nothing
        for d in (self.logs, self.replicas):
            own_dir(d, None, 0o700)
        for d in (self.output, self.work, self.home, self.tmp):
            own_dir(d, uid, 0o700)

    def read_state(self) -> dict | None:
        try:
            data = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        return data if data.get("version") == STATE_VERSION else None

    def write_state(self, state: dict) -> None:
        state["version"] = STATE_VERSION
        tmp = self.state_file.with_suffix(".tmp")
        # The service's alone (0600): it holds every replica's command line, secrets in arguments included.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(fd, 0o600)  # an older tmp file left by a crash keeps its mode otherwise
            f.write(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)  # a crash leaves the old or the new file, never half

    def read_started(self, task: str) -> dict | None:
        return _read_json(self.started_file(task))

    def read_exit(self, task: str) -> dict | None:
        return _read_json(self.exit_file(task))


def replica_status(rd: RunDir, task: str, state: dict | None = None) -> dict:
    """A replica's process as its wrapper recorded it: PENDING (not started), RUNNING, then
    SUCCEEDED (exit 0), FAILED, or STOPPED (the service ended it: a cancel, another replica's
    failure), with its exit code, signal and times. `state`: the run's state.json as read; once
    the run has its outcome a replica with no exit record (its wrapper killed with the rest, a
    service restart) ended with the job: STOPPED at the job's end, never RUNNING after it."""
    started, ended = rd.read_started(task) or {}, rd.read_exit(task)
    outcome = (state or {}).get("outcome") or {}
    if ended is None and outcome:
        return {"state": "STOPPED", "exit_code": None, "signal": None,
                "started_at": started.get("started_at"), "ended_at": outcome.get("ended_at")}
    if ended is None:
        return {"state": "RUNNING" if started else "PENDING", "started_at": started.get("started_at")}
    how = "SUCCEEDED" if ended.get("exit_code") == 0 else "STOPPED" if ended.get("terminated_by") else "FAILED"
    return {"state": how, "exit_code": ended.get("exit_code"), "signal": ended.get("signal"),
            "started_at": started.get("started_at"), "ended_at": ended.get("ended_at")}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
