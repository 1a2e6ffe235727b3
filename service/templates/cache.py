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
from dataclasses import dataclass

from service.jobspec import Prepared

Key = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class Head:
    """A template's head as a submit read it (jobs.precheck), kept only when the template was not
    archived and its team had no active webhook and no budgets: the next submit of it may skip
    the pre-check and write its job in one statement guarded by `jobs.precheck.guard`, which
    checks all of it again where it writes."""

    template_id: uuid.UUID
    name: str
    latest_version: int


class TemplateCache:
    """Least recently used first out, at most `size` versions (TRAINJOBS_TEMPLATE_CACHE_SIZE),
    and at most `size` heads: what a submit last read of a template (Head), a guess
    that the next submit checks in the statement that writes its job (never trusted alone)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Key, Prepared] = OrderedDict()
        self._heads: OrderedDict[tuple[uuid.UUID, str], Head] = OrderedDict()
        self._lock = threading.Lock()  # requests run in a thread pool

    def head(self, team_id: uuid.UUID, name: str) -> Head | None:
        with self._lock:
            return self._heads.get((team_id, name))

    def keep_head(self, team_id: uuid.UUID, name: str, head: Head | None) -> None:
        """`head` None: forget it (the next submit reads the template first)."""
        with self._lock:
            if head is None or self.size <= 0:
                self._heads.pop((team_id, name), None)
                return
            self._heads[(team_id, name)] = head
            self._heads.move_to_end((team_id, name))
            while len(self._heads) > self.size:
                self._heads.popitem(last=False)

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

    @property
    def heads_kept(self) -> int:
        return len(self._heads)
