"""The shared-capacity domain's one per-process cache: the operator's settings every submit
needs (a backend's capacity, its team shares, the priority classes), each kept for
TRAINJOBS_QUEUE_CACHE_SECONDS. A change made through this process's API clears it all once
committed (capacity/router.py); another process's is seen within the time to live. Each
backend's queue is kept by capacity/queue_cache.py, which reads this cache's TTL and its clears
(`generation`): a clear drops the computed queues too.

One computation at a time per key: a reader that finds the entry stale takes the key's lock and
loads it. Readers arriving meanwhile do not wait when there is an older value: they read that one;
with none yet, they wait and take the value it gives, however long it took. A value loaded across
a clear() is not kept: it may have read the rows from before the change."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any


class TtlCache:
    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._entries: dict[Hashable, tuple[float, Any]] = {}   # key -> (when its load began, value)
        self._finished: dict[Hashable, float] = {}              # when each key's last load ended
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()
        self._cleared = 0                                       # clear() calls so far

    def _lock(self, key: Hashable) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _fresh(self, key: Hashable) -> tuple[float, Any] | None:
        entry = self._entries.get(key)
        return entry if entry is not None and self.clock() - entry[0] < self.seconds else None

    def get(self, key: Hashable, load: Callable[[], Any]) -> Any:
        found = self._fresh(key)
        if found is not None:
            return found[1]
        arrived = self.clock()
        lock = self._lock(key)
        if not lock.acquire(blocking=False):
            kept = self._entries.get(key)
            if kept is not None:
                return kept[1]                  # being loaded: what was, until it is ready
            lock.acquire()
        try:
            found = self._fresh(key)
            kept = self._entries.get(key)
            if found is None and kept is not None and self._finished.get(key, -1.0) >= arrived:
                found = kept                    # loaded by the reader we waited for
            if found is not None:
                return found[1]
            return self._load(key, load)
        finally:
            lock.release()

    def _load(self, key: Hashable, load: Callable[[], Any]) -> Any:
        started, cleared = self.clock(), self._cleared
        value = load()
        with self._guard:
            if cleared == self._cleared:
                # Aged from when the load began: what it read is that old.
                self._entries[key] = (started, value)
                self._finished[key] = self.clock()
        return value

    @property
    def generation(self) -> int:
        """How many times clear() was called: what was read before a later one may be out of date."""
        return self._cleared

    def clear(self) -> None:
        with self._guard:
            self._cleared += 1
            self._entries.clear()
            self._finished.clear()
