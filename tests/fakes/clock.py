"""The fakes' clock: real time plus an offset a test moves forward (`advance`), so
"30 seconds later" happens at once and nothing waits on a sleep. Work scheduled for
a later instant (`wait_until`) wakes as soon as the clock gets there."""
from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class FakeClock:
    def __init__(self) -> None:
        self._offset_ns = 0
        self._cond = threading.Condition()
        self._frozen: tuple[int, int] | None = None   # (time_ns, monotonic_ns) when frozen

    def freeze(self) -> None:
        """From now on only `advance` moves the clock: a test that reads exact waits (a
        Retry-After) must not depend on how long a loaded machine takes between two calls."""
        with self._cond:
            self._frozen = (time.time_ns(), time.monotonic_ns())

    def _real_ns(self) -> tuple[int, int]:
        return self._frozen if self._frozen is not None else (time.time_ns(), time.monotonic_ns())

    def now_ns(self) -> int:
        return self._real_ns()[0] + self._offset_ns

    def utcnow(self) -> datetime:
        return datetime.fromtimestamp(self.now_ns() / 1e9, UTC)

    def monotonic(self) -> float:
        return (self._real_ns()[1] + self._offset_ns) / 1e9

    @property
    def offset_seconds(self) -> float:
        return self._offset_ns / 1e9

    def advance(self, seconds: float) -> None:
        with self._cond:
            self._offset_ns += int(seconds * 1e9)
            self._cond.notify_all()

    def wait_until(self, ns: int, stop: threading.Event | None = None) -> bool:
        """Block until the clock reads `ns` (True), or `stop` is set (False)."""
        with self._cond:
            while self.now_ns() < ns:
                if stop is not None and stop.is_set():
                    return False
                self._cond.wait(min(0.2, max(0.001, (ns - self.now_ns()) / 1e9)))
            return True

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
