"""The queue's computations, kept per backend for TRAINJOBS_QUEUE_CACHE_SECONDS in this process
(held by the services container): many readers of GET /v1/queue, of waiting jobs' views and of
/ui/queue cost one planner pass per backend per period, not one each.

One computation at a time per backend: a reader that finds the entry stale takes the backend's
lock and computes. Readers arriving meanwhile do not wait for it when there is an older result:
they read that one (its `computed_at` says how old); with none yet, they wait and take the result
it gives, however long it took (a computation longer than the TTL used to leave each waiting
reader to compute again in turn: 8 readers, p99 30 s). Read-only: the planner's snapshot and
decision, never a write (the controller alone acts)."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from service.capacity.planner import Planner
from service.capacity.queue import Computed
from service.core.clock import utcnow
from service.lifecycle.admission import WaitingNote
from service.lifecycle.protocol import Backend


class QueueCache:
    def __init__(self, planner: Planner, seconds: float, *, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = utcnow,
                 slots: Callable[[str], int | None] = lambda backend: None) -> None:
        """`slots`: a backend's launch slots (None: it runs any number of jobs at once)."""
        self.planner, self.seconds, self.clock, self.now, self.slots = planner, seconds, clock, now, slots
        self._entries: dict[str, tuple[float, Computed]] = {}
        self._finished: dict[str, float] = {}    # when each backend's last computation ended
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.computations = 0     # how many passes this cache ran (tests and metrics read it)

    def _lock(self, backend: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(backend, threading.Lock())

    def _fresh(self, backend: str) -> Computed | None:
        entry = self._entries.get(backend)
        if entry is not None and self.clock() - entry[0] < self.seconds:
            return entry[1]
        return None

    def get(self, session: Session, backend: str) -> Computed:
        """The backend's queue, computed with `session` if what is kept is older than the TTL
        and no other reader is computing it."""
        found = self._fresh(backend)
        if found is not None:
            return found
        arrived = self.clock()
        lock = self._lock(backend)
        if not lock.acquire(blocking=False):
            kept = self._entries.get(backend)
            if kept is not None:
                return kept[1]                  # being computed: what was, until it is ready
            lock.acquire()
        try:
            found = self._fresh(backend)
            kept = self._entries.get(backend)
            if found is None and kept is not None and self._finished.get(backend, -1.0) >= arrived:
                found = kept[1]                 # computed by the reader we waited for
            if found is not None:
                return found
            started = self.clock()
            snap = self.planner.snapshot(session, backend, slots=self.slots(backend), forecast=True)
            computed = Computed.of(snap, self.planner.decide(snap, self.now()), self.now())
            self.computations += 1
            # Aged from when the computation began: what it read is that old.
            self._entries[backend] = (started, computed)
            self._finished[backend] = self.clock()
            return computed
        finally:
            lock.release()

    def note(self, session: Session, backend: str, job_id: uuid.UUID) -> WaitingNote | None:
        """A waiting job's place (None: not in the planner's queue, e.g. held by a retry backoff)."""
        return self.get(session, backend).notes.get(job_id)


def launch_slots(backends: Mapping[str, Backend], backend: str) -> int | None:
    """The backend's limit on the jobs it runs at once (TRAINJOBS_LOCAL_MAX_RUNNING_JOBS, say), which
    the scheduler arbitrates as the launch slots; the running jobs holding them are in the snapshot."""
    found = backends.get(backend)
    return found.capabilities.max_running if found is not None else None
