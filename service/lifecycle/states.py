"""The job state machine as data. Only lifecycle.engine writes states; it checks
every move against this table."""
from __future__ import annotations

import enum


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

ALLOWED: dict[JobState, frozenset[JobState]] = {
    S.QUEUED: frozenset({S.PENDING, S.RUNNING, S.CANCELLING, *TERMINAL}),
    S.PENDING: frozenset({S.RUNNING, S.CANCELLING, S.PAUSED, *TERMINAL}),
    S.RUNNING: frozenset({S.CANCELLING, S.PAUSED, S.UPDATING, *TERMINAL}),
    # A job can end on its own (any way at all) before the cancel reaches it.
    S.CANCELLING: frozenset(TERMINAL),
    S.PAUSED: frozenset({S.RUNNING, S.PENDING, S.CANCELLING, *TERMINAL}),
    S.UPDATING: frozenset({S.RUNNING, S.PAUSED, S.CANCELLING, *TERMINAL}),
    **{t: frozenset() for t in TERMINAL},
}
assert all(ALLOWED[s] for s in ACTIVE), "every active state must have a way out"


def can_transition(src: JobState, dst: JobState) -> bool:
    return dst in ALLOWED[src]
