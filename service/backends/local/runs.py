"""A local job's run: what is recorded of it on disk (RunState, in state.json) and what the
backend follows of it in memory (Run, ReplicaProc), and its reference (`<host>:<run folder>`).

First in a job's life: the launcher (launcher.py) makes a Run and records its RunState,
the supervisor (supervisor.py) follows it and records its outcome, and a restarted
service rebuilds it from state.json alone. So the file format is a contract with the
service's earlier versions: RunState.from_json reads every file they wrote (the keys of
state.json are kept as they were, missing ones take their old meaning, unknown ones are
carried through untouched) and to_json writes the same keys back."""
from __future__ import annotations

import logging
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from service.backends.local.rundir import RunDir
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.local")


def host_id() -> str:
    return socket.gethostname()


def make_ref(path: Path) -> str:
    return f"{host_id()}:{path}"


def parse_ref(ref: str) -> tuple[str | None, Path]:
    """(host, run folder) of a backend reference; references stored before hosts were
    recorded are bare paths (host None: taken as this host)."""
    if ref.startswith("/"):
        return None, Path(ref)
    host, _, path = ref.partition(":")
    return host, Path(path)


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(ts: str | None) -> datetime | None:
    return datetime.fromisoformat(ts) if ts else None


# -- on disk: state.json ---------------------------------------------------------------------

@dataclass
class ReplicaState:
    """One replica as recorded: where it listens, what it runs, which process it is."""
    pool: int
    index: int
    tf_role: str | None
    address: str
    argv: list[str]
    pid: int | None = None
    create_time: float | None = None       # psutil create_time, to tell our pid from a reused one

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReplicaState:
        return cls(pool=d["pool"], index=d["index"], tf_role=d.get("tf_role"), address=d.get("address", ""),
                   argv=list(d.get("argv") or []), pid=d.get("pid"), create_time=d.get("create_time"))

    def to_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "index": self.index, "tf_role": self.tf_role, "address": self.address,
                "pid": self.pid, "create_time": self.create_time, "argv": self.argv}


@dataclass
class Holder:
    """The init of the job's namespaces (nsholder.py); lock_fd: the uid's lock, the same
    fd number in it as in the service that started it."""
    pid: int
    create_time: float | None
    lock_fd: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Holder | None:
        return None if d is None else cls(pid=d["pid"], create_time=d.get("create_time"), lock_fd=d.get("lock_fd"))

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "create_time": self.create_time, "lock_fd": self.lock_fd}


@dataclass
class Outcome:
    """How the run ended, recorded before anyone hears of it: a restart says the same."""
    state: JobState
    reason: str
    error: dict[str, Any] | None
    ended_at: datetime

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Outcome | None:
        if d is None:
            return None
        return cls(state=JobState(d["state"]), reason=d["reason"], error=d.get("error"),
                   ended_at=_parse(d.get("ended_at")) or _now())

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state.value, "reason": self.reason, "error": self.error,
                "ended_at": _iso(self.ended_at)}


Phase = Literal["launching", "running"]


@dataclass
class RunState:
    """What state.json holds. Written atomically (RunDir.write_state) at each step that a
    restarted service must know of: launching, every pid recorded, running, a cancel
    asked for, the outcome, nothing left alive (gone)."""
    job_id: uuid.UUID
    launched_at: datetime
    replicas: dict[str, ReplicaState]
    phase: Phase = "running"
    output_dir: str | None = None
    base_output_directory: str | None = None
    timeout_seconds: float | None = None
    stall_timeout_seconds: float | None = None
    host: str | None = None
    uid: int | None = None                 # the job's own uid (the service is root), else None
    holder: Holder | None = None           # None: an unsandboxed run
    cgroup: str | None = None
    cancel_requested_at: str | None = None
    # The stop under way, kept across a service restart: what it is ("cancelled", "preempted"),
    # its grace, and when SIGKILL is due (wall clock). A restarted service used to stop a
    # preempted job as a cancel, with the cancel's grace counted again from the restart.
    stopped_for: str | None = None
    stop_grace: float | None = None
    stop_deadline_at: str | None = None
    outcome: Outcome | None = None
    gone: bool = False                     # no process of it is left
    extra: dict[str, Any] = field(default_factory=dict)   # keys this version does not know: kept

    _KEYS = frozenset({"job_id", "launched_at", "replicas", "phase", "output_dir", "base_output_directory",
                       "timeout_seconds", "stall_timeout_seconds", "host", "uid", "holder", "cgroup",
                       "cancel_requested_at", "stopped_for", "stop_grace", "stop_deadline_at", "outcome", "gone",
                       "version"})

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunState:
        launched = _parse(d["launched_at"])
        assert launched is not None, "state.json without launched_at"
        return cls(
            job_id=uuid.UUID(d["job_id"]), launched_at=launched,
            replicas={task: ReplicaState.from_json(r) for task, r in d["replicas"].items()},
            phase=d.get("phase") or "running", output_dir=d.get("output_dir"),
            base_output_directory=d.get("base_output_directory"), timeout_seconds=d.get("timeout_seconds"),
            stall_timeout_seconds=d.get("stall_timeout_seconds"), host=d.get("host"), uid=d.get("uid"),
            holder=Holder.from_json(d.get("holder")), cgroup=d.get("cgroup"),
            cancel_requested_at=d.get("cancel_requested_at"), stopped_for=d.get("stopped_for"),
            stop_grace=d.get("stop_grace"), stop_deadline_at=d.get("stop_deadline_at"),
            outcome=Outcome.from_json(d.get("outcome")),
            gone=bool(d.get("gone")), extra={k: v for k, v in d.items() if k not in cls._KEYS})

    def to_json(self) -> dict[str, Any]:
        # The stop's keys only while a stop is under way: a file of a run never stopped reads as
        # an earlier version wrote it.
        stop = {k: v for k, v in (("stopped_for", self.stopped_for), ("stop_grace", self.stop_grace),
                                  ("stop_deadline_at", self.stop_deadline_at)) if v is not None}
        return {**self.extra, **stop,
                "job_id": str(self.job_id), "phase": self.phase, "launched_at": _iso(self.launched_at),
                "output_dir": self.output_dir, "base_output_directory": self.base_output_directory,
                "timeout_seconds": self.timeout_seconds, "host": self.host, "uid": self.uid,
                "stall_timeout_seconds": self.stall_timeout_seconds,
                "holder": self.holder.to_json() if self.holder else None, "cgroup": self.cgroup,
                "replicas": {task: r.to_json() for task, r in self.replicas.items()},
                "cancel_requested_at": self.cancel_requested_at,
                "outcome": self.outcome.to_json() if self.outcome else None, "gone": self.gone}


def read_state(rd: RunDir) -> RunState | None:
    raw = rd.read_state()
    return RunState.from_json(raw) if raw is not None else None


# -- in memory: what the supervisor follows ----------------------------------------------------

@dataclass
class ReplicaProc:
    task: str
    pool: int
    index: int
    tf_role: str | None
    pid: int | None = None
    created: float | None = None          # psutil create_time, to tell our pid from a reused one
    popen: subprocess.Popen | None = None  # None after a restart: we are not its parent any more
    exit: dict[str, Any] | None = None     # the wrapper's exit record, or {"lost": True, ...}
    exited_unwatched: bool = False         # it ended while the service was not running
    started: bool = False

    @property
    def failed(self) -> bool:
        return self.exit is not None and (bool(self.exit.get("lost")) or self.exit.get("exit_code") != 0)

    @property
    def label(self) -> str:
        return f"{self.task} ({self.tf_role} {self.index})"


@dataclass
class Run:
    job_id: uuid.UUID
    dir: RunDir
    state: RunState                       # what state.json holds (save() writes it)
    replicas: dict[str, ReplicaProc]
    uid_lock: int | None = None           # our fd of the uid's host-wide lock (sandbox.UidPool)
    adopted: bool = False
    adopted_mono: float = 0.0
    adopted_polls: int = 0                # polls seen before it was adopted
    claimed: bool = False                 # a poll has seen its job
    stop_deadline: float | None = None    # monotonic; SIGKILL after it
    killed: bool = False
    grace: float | None = None            # this stop's grace (a preemption's); None: the cancel grace
    stopped_for: str = "cancelled"        # what the stop is, in the outcome's reason ("preempted")
    gone: bool = False                    # no process of it is left
    reported: bool = False
    orphan: bool = False
    progress: dict | None = None
    progress_dirty: bool = False
    progress_offsets: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_state(cls, rd: RunDir, state: RunState) -> Run:
        run = cls(state.job_id, rd, state, {})
        for task, r in state.replicas.items():
            run.replicas[task] = ReplicaProc(task, r.pool, r.index, r.tf_role, pid=r.pid, created=r.create_time)
        run.gone = state.gone
        return run

    @property
    def ref(self) -> str:
        return make_ref(self.dir.path)

    @property
    def launched_at(self) -> datetime:
        return self.state.launched_at

    @property
    def timeout(self) -> float | None:
        return self.state.timeout_seconds

    @property
    def stall_timeout(self) -> float | None:
        return self.state.stall_timeout_seconds

    @property
    def uid(self) -> int | None:
        return self.state.uid

    @property
    def outcome(self) -> Outcome | None:
        return self.state.outcome

    @property
    def stopping(self) -> bool:
        return self.stop_deadline is not None

    @property
    def holder(self) -> tuple[int, float | None] | None:
        """(pid, start time) of the init of the job's namespaces; None for an unsandboxed run."""
        h = self.state.holder
        return None if h is None else (h.pid, h.create_time)

    @property
    def cgroup(self) -> Path | None:
        return Path(self.state.cgroup) if self.state.cgroup else None

    @property
    def output_dir(self) -> Path:
        return Path(self.state.output_dir) if self.state.output_dir else self.dir.output

    def save(self) -> None:
        self.dir.write_state(self.state.to_json())

    def record_outcome(self, state: JobState, reason: str, error: dict[str, Any] | None,
                       ended: datetime | None = None) -> None:
        self.state.outcome = Outcome(state, reason[:2000], error, ended or _now())
        self.save()  # before anyone hears of it: a restart says the same
        log.info("job %s: %s: %s", self.job_id, state.value, reason)
