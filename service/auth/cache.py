"""Actors of recently seen tokens, per process, for the submit path.

A token's team, name and role never change; only a revocation does. So a cached actor
is never trusted alone: the submit's first query (templates.service.for_submit) also
reads whether the token is still unrevoked, in the same round trip. A revocation in any
process is therefore refused on the very next submit everywhere, and a cache hit saves
a round trip and a trip through the thread pool. Entries expire after `ttl` seconds
(TRAINJOBS_AUTH_CACHE_SECONDS) so a deleted team or token does not linger in memory."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

from service.auth.service import Actor


class TokenCache:
    def __init__(self, size: int, ttl: float) -> None:
        self.size, self.ttl = size, ttl
        self._items: OrderedDict[str, tuple[float, Actor]] = OrderedDict()
        self._lock = threading.Lock()  # read on the event loop, written from the thread pool

    def get(self, token_hash: str) -> Actor | None:
        with self._lock:
            found = self._items.get(token_hash)
            if found is None:
                return None
            if found[0] < time.monotonic():
                del self._items[token_hash]
                return None
            return found[1]

    def put(self, token_hash: str, actor: Actor) -> None:
        if self.size <= 0 or self.ttl <= 0:
            return
        with self._lock:
            self._items[token_hash] = (time.monotonic() + self.ttl, actor)
            self._items.move_to_end(token_hash)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, token_hash: str) -> None:
        with self._lock:
            self._items.pop(token_hash, None)

    def __len__(self) -> int:
        return len(self._items)
