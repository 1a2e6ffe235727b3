"""Which QUEUED jobs a backend may start now: oldest first, within its cap.

The same rule for every backend. A job is *launched* once it has a backend
reference or has left QUEUED; launched, unfinished jobs count against the cap.
The order is strict: when the oldest cannot be submitted (the backend said
"later"), nobody younger jumps ahead of it on that pass. A retry attempt still in its
backoff (`not_before` in the future) is not in the queue yet: it waits, and blocks nobody."""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import and_, func, not_, or_, select
from sqlalchemy.orm import Session

from service.lifecycle.handles import read_handles
from service.lifecycle.protocol import Capabilities
from service.lifecycle.states import ACTIVE, JobState
from service.models import Job

_ACTIVE = [s.value for s in ACTIVE]
UNLAUNCHED = and_(Job.state == JobState.QUEUED.value, Job.backend_ref.is_(None))


def launched_active(backend: str):
    return and_(Job.backend == backend, Job.state.in_(_ACTIVE), not_(UNLAUNCHED))


def running_count(session: Session, backend: str) -> int:
    return session.scalar(select(func.count()).select_from(Job).where(launched_active(backend)))


def admissible(session: Session, backend: str, caps: Capabilities, batch: int) -> list:
    """The rows of the jobs to submit on this pass, oldest first."""
    room = batch
    if caps.max_running is not None:
        room = min(room, caps.max_running - running_count(session, backend))
    if caps.max_submits_per_pass is not None:
        room = min(room, caps.max_submits_per_pass)
    if room <= 0:
        return []
    return read_handles(session, [Job.backend == backend, UNLAUNCHED, due(datetime.now(timezone.utc))], limit=room)


def due(now: datetime):
    """Not held back by a retry backoff."""
    return or_(Job.not_before.is_(None), Job.not_before <= now)


def waiting_cancelled(backend: str):
    """Jobs cancelled while still waiting: never launched, so nothing to stop."""
    return and_(Job.backend == backend, Job.state == JobState.CANCELLING.value,
                Job.backend_ref.is_(None), Job.launch_attempted_at.is_(None))


def cancelling(backend: str):
    return and_(Job.backend == backend, Job.state == JobState.CANCELLING.value,
                or_(Job.backend_ref.is_not(None), Job.launch_attempted_at.is_not(None)))
