"""The job state machine. Transitions are data; `transition()` is the one
function every writer goes through, and it writes one JobEvent per change."""
from __future__ import annotations

import enum
from datetime import datetime, timezone

from service.errors import Conflict


class JobState(str, enum.Enum):
    # Vertex's JobState names without the JOB_STATE_ prefix.
    QUEUED = "QUEUED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    PAUSED = "PAUSED"
    EXPIRED = "EXPIRED"
    UPDATING = "UPDATING"
    PARTIALLY_SUCCEEDED = "PARTIALLY_SUCCEEDED"


S = JobState
# PARTIALLY_SUCCEEDED is final on Vertex too (nothing moves a job out of it), so
# it is terminal here: a job in it must not be polled forever.
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.EXPIRED, S.PARTIALLY_SUCCEEDED})
ACTIVE = frozenset(set(S) - TERMINAL)

_ENDS = {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.EXPIRED, S.PARTIALLY_SUCCEEDED}
ALLOWED: dict[JobState, frozenset[JobState]] = {
    S.QUEUED: frozenset({S.PENDING, S.RUNNING, S.CANCELLING, *_ENDS}),
    S.PENDING: frozenset({S.RUNNING, S.CANCELLING, S.PAUSED, *_ENDS}),
    S.RUNNING: frozenset({S.CANCELLING, S.PAUSED, S.UPDATING, *_ENDS}),
    # A job can finish on its own before the cancel reaches it.
    S.CANCELLING: frozenset({S.CANCELLED, S.SUCCEEDED, S.FAILED, S.EXPIRED}),
    S.PAUSED: frozenset({S.RUNNING, S.PENDING, S.CANCELLING, *_ENDS}),
    S.UPDATING: frozenset({S.RUNNING, S.PAUSED, S.CANCELLING, *_ENDS}),
    **{t: frozenset() for t in TERMINAL},
}


def can_transition(src: JobState, dst: JobState) -> bool:
    return dst in ALLOWED[src]


def transition(session, job, dst: JobState, *, reason: str = "", actor: str = "system",
               at: datetime | None = None) -> bool:
    """Move `job` to `dst`, recording a JobEvent. Returns False if already there.

    Raises Conflict for an illegal move (e.g. anything out of a terminal state)."""
    from service.models import JobEvent  # models import this module

    src = JobState(job.state)
    dst = JobState(dst)
    if src == dst:
        return False
    if not can_transition(src, dst):
        raise Conflict(f"job {job.id} cannot go from {src.value} to {dst.value}",
                       current_state=src.value)
    now = at or datetime.now(timezone.utc)
    job.state = dst.value
    job.updated_at = now
    if dst == S.RUNNING and job.started_at is None:
        job.started_at = now
    if dst in TERMINAL and job.ended_at is None:
        job.ended_at = now
    session.add(JobEvent(job_id=job.id, from_state=src.value, to_state=dst.value,
                         reason=reason[:2000], actor=actor[:200], at=now))
    return True
