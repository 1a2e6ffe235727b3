"""A small per-process cache of the operator's settings that every submit (and every queue read)
needs: the capacity of a backend, its team shares, the priority classes. A change made through
this process's API clears it at once; another process's is seen within its time to live
(TRAINJOBS_QUEUE_CACHE_SECONDS)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any


class TtlCache:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._values: dict[Hashable, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], Any]) -> Any:
        now = time.monotonic()
        with self._lock:
            hit = self._values.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        value = load()
        with self._lock:
            self._values[key] = (now + self.seconds, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
