"""The queue's computations, one per backend, kept in the shared-capacity cache
(capacity/cache.py: for TRAINJOBS_QUEUE_CACHE_SECONDS, one computation at a time, an older one
read meanwhile): many readers of GET /v1/queue, of waiting jobs' views and of /ui/queue cost one
planner pass per backend per period, not one each. Read-only: the planner's snapshot and
decision, never a write (the controller alone acts)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from service.capacity.cache import TtlCache
from service.capacity.planner import Planner
from service.capacity.queue import Computed
from service.core.clock import utcnow
from service.lifecycle.protocol import Backend


class QueueCache:
    def __init__(self, planner: Planner, cache: TtlCache, *, now: Callable[[], datetime] = utcnow,
                 slots: Callable[[str], int | None] = lambda backend: None) -> None:
        """`slots`: a backend's launch slots (None: it runs any number of jobs at once)."""
        self.planner, self.cache, self.now, self.slots = planner, cache, now, slots
        self.computations = 0     # how many passes this cache ran (tests and metrics read it)

    @property
    def seconds(self) -> float:
        """How long a computation is kept (the UI refreshes a queue shown at this pace)."""
        return self.cache.seconds

    def get(self, session: Session, backend: str) -> Computed:
        """The backend's queue, computed with `session` if what is kept is older than the TTL
        and no other reader is computing it."""
        return self.cache.get(("queue", backend), lambda: self._compute(session, backend))

    def _compute(self, session: Session, backend: str) -> Computed:
        snap = self.planner.snapshot(session, backend, slots=self.slots(backend), forecast=True)
        computed = Computed.of(snap, self.planner.decide(snap, self.now()), self.now(), self.planner.policy)
        self.computations += 1
        return computed


def launch_slots(backends: Mapping[str, Backend], backend: str) -> int | None:
    """The backend's limit on the jobs it runs at once (TRAINJOBS_LOCAL_MAX_RUNNING_JOBS, say), which
    the scheduler arbitrates as the launch slots; the running jobs holding them are in the snapshot."""
    found = backends.get(backend)
    return found.capabilities.max_running if found is not None else None
