"""The Backend protocol: what the service asks of a place that runs jobs.

Backends never touch the database. They receive JobHandles (a read-only view
of a job row) and answer with Observations; the reconciler applies those
through the state machine, so every state change is one JobEvent."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Protocol, Sequence, runtime_checkable

from service.errors import Problem
from service.jobs.states import JobState
from service.jobspec import CompiledJob


class TransientBackendError(Exception):
    """Worth retrying later (429, 5xx, timeouts): never a reason to fail a job."""


class PermanentBackendError(Exception):
    """The backend refused the job for good; `code` and `message` are its own words."""

    def __init__(self, message: str, code: int | str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code


class JobHandle:
    """A read-only view of one job for a backend.

    `compiled` may be given as a zero-argument loader: the reconciler hands over
    every active job each pass, and most (queued, or merely polled) never need
    their CustomJob parsed, so it is loaded on first use only."""

    __slots__ = ("id", "state", "backend_ref", "created_at", "display_name", "_compiled")

    def __init__(self, id: uuid.UUID, state: JobState, backend_ref: str | None,
                 compiled: CompiledJob | Callable[[], CompiledJob], created_at: datetime,
                 display_name: str = "") -> None:
        self.id = id
        self.state = state
        self.backend_ref = backend_ref   # the backend's own id: a CustomJob name, a local run folder
        self.created_at = created_at
        self.display_name = display_name
        self._compiled = compiled

    @property
    def compiled(self) -> CompiledJob:
        if not isinstance(self._compiled, CompiledJob):
            self._compiled = self._compiled()
        return self._compiled

    def __repr__(self) -> str:
        return f"JobHandle({self.id}, {self.state.value}, {self.backend_ref!r})"


@dataclass(frozen=True)
class Observation:
    """What a backend saw of one job. None means "no news" for that field."""

    job_id: uuid.UUID
    state: JobState | None = None
    reason: str = ""
    error: dict | None = None         # {"code": ..., "message": ..., "replica": ...}
    backend_ref: str | None = None
    console_url: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    progress: dict | None = None


@dataclass(frozen=True)
class SubmitResult:
    backend_ref: str | None = None
    state: JobState | None = None     # None: stays QUEUED until a poll says more
    console_url: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class LogLine:
    cursor: str          # opaque; pass back as `since` to read what comes after
    replica: str         # task name, e.g. workerpool1-0
    stream: str          # stdout | stderr (local) or the entry's severity (Cloud Logging)
    timestamp: datetime
    message: str


@dataclass(frozen=True)
class LogPage:
    lines: list[LogLine] = field(default_factory=list)
    cursor: str | None = None   # resume point after the last line (None: nothing read yet)


@runtime_checkable
class Backend(Protocol):
    name: str

    def start(self) -> None:
        """Called once by the app's lifespan. Raise here on misconfiguration."""

    def close(self) -> None: ...

    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        """Backend-specific refusals, before the job is stored (e.g. no Reduction Server locally)."""

    def submit(self, job: JobHandle) -> SubmitResult:
        """Called right after the job row is committed. May raise TransientBackendError
        (the job stays QUEUED and poll() must finish the submit) or PermanentBackendError."""

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        """One batch of this backend's non-terminal jobs, oldest first."""

    def cancel(self, job: JobHandle) -> JobState | None:
        """Ask the job to stop. Return a state reached at once (CANCELLED for a job
        that never started), or None when a later poll will report the outcome."""

    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None,
                  limit: int) -> LogPage:
        """Lines after cursor `since`, oldest first, at most `limit`."""
