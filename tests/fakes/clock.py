"""The fakes' clock: real time plus an offset a test moves forward (`advance`), so
"30 seconds later" happens at once and nothing waits on a sleep. Work scheduled for
a later instant (`wait_until`) wakes as soon as the clock gets there."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone


class FakeClock:
    def __init__(self) -> None:
        self._offset_ns = 0
        self._cond = threading.Condition()

    def now_ns(self) -> int:
        return time.time_ns() + self._offset_ns

    def utcnow(self) -> datetime:
        return datetime.now(timezone.utc) + timedelta(microseconds=self._offset_ns // 1000)

    def monotonic(self) -> float:
        return time.monotonic() + self._offset_ns / 1e9

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
