"""Template versions parsed and checked once (jobspec.Prepared), per process.

A version never changes once written, so (template id, version) names one Prepared
for good: nothing needs invalidating. What can change — the latest version, the
archive flag, the template itself — is read from the database on every submit
(jobs.precheck.for_submit), so an update, archive or unarchive holds from the
next request on, in every process."""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict

from service.jobspec import Prepared

Key = tuple[uuid.UUID, int]


class TemplateCache:
    """Least recently used first out, at most `size` versions (TRAINJOBS_TEMPLATE_CACHE_SIZE)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Key, Prepared] = OrderedDict()
        self._lock = threading.Lock()  # requests run in a thread pool

    def get(self, key: Key) -> Prepared | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: Key, prepared: Prepared) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = prepared
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
