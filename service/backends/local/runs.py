"""A local job's run as the backend follows it (Run, ReplicaProc) and its reference
(`<host>:<run folder>`). Apart from backend.py so that launch.py, which makes runs,
does not import the backend that calls it."""
from __future__ import annotations

import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from service.backends.local.rundir import RunDir


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


@dataclass
class ReplicaProc:
    task: str
    pool: int
    index: int
    tf_role: str | None
    pid: int | None = None
    created: float | None = None          # psutil create_time, to tell our pid from a reused one
    popen: subprocess.Popen | None = None  # None after a restart: we are not its parent any more
    exit: dict | None = None               # the wrapper's exit record, or {"lost": True, ...}
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
    state: dict                           # what state.json holds
    replicas: dict[str, ReplicaProc]
    launched_at: datetime
    timeout: float | None
    stall_timeout: float | None = None
    uid: int | None = None
    uid_lock: int | None = None           # our fd of the uid's host-wide lock (sandbox.UidPool)
    adopted: bool = False
    adopted_mono: float = 0.0
    adopted_polls: int = 0                # polls seen before it was adopted
    claimed: bool = False                 # a poll has seen its job
    outcome: dict | None = None
    stop_deadline: float | None = None    # monotonic; SIGKILL after it
    killed: bool = False
    gone: bool = False                    # no process of it is left
    reported: bool = False
    orphan: bool = False
    progress: dict | None = None
    progress_dirty: bool = False
    progress_offsets: dict[str, int] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return make_ref(self.dir.path)

    @property
    def stopping(self) -> bool:
        return self.stop_deadline is not None

    @property
    def holder(self) -> tuple[int | None, float | None] | None:
        """(pid, start time) of the init of the job's namespaces; None for an unsandboxed run."""
        h = self.state.get("holder")
        return None if h is None else (h.get("pid"), h.get("create_time"))

    @property
    def cgroup(self) -> Path | None:
        return Path(self.state["cgroup"]) if self.state.get("cgroup") else None
