"""The one clock the Vertex backend's parts share.

Launch attempts are stamped by the lifecycle in UTC (`wall`); timers and the budget run
on `mono`. One mutable object, handed to every part, so that a test can put the whole
backend on a fake clock by replacing these two (tests/fakes/harness.py does, through
the backend's `_now` and `_mono`)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Clock:
    wall: Callable[[], datetime] = field(default=_utc_now)
    mono: Callable[[], float] = field(default=time.monotonic)
