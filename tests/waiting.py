"""The one way tests wait for something to happen: poll a real signal until it holds.

No test sleeps for a guessed time. A wait is bounded twice, so a broken service fails the
test instead of hanging the suite: by time (`timeout` seconds on the monotonic clock) and by
count (at most timeout / interval + 1 checks, which a slow predicate reaches first only if
the clock bound failed). Its failure names what was awaited and what was last seen."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 60.0   # generous: a busy 2-core machine runs several suites at once
INTERVAL = 0.05


def wait_for(predicate: Callable[[], T], what: str, timeout: float = TIMEOUT, interval: float = INTERVAL) -> T:
    """Call `predicate` until it returns something truthy, and return that.

    `what` completes "waiting for ...": say what should happen ("job x to reach RUNNING").
    An AssertionError raised by the predicate fails the wait at once (a check that must hold
    on every poll); other exceptions propagate too."""
    checks = max(1, math.ceil(timeout / interval)) + 1
    started = time.monotonic()
    last: object = None
    done = 0
    while done < checks:
        last = predicate()
        done += 1
        if last:
            return last
        if time.monotonic() - started > timeout:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s ({done} checks) waiting for {what}; last seen: {last!r:.300}")
