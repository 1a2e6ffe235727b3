"""What a backend's controller loop says of its own passes, for the queue's forecast: how long its
recent full passes took (those that launched jobs apart: they plan, launch and write, and their
launches come at their end) and when the last one ended (lifecycle/loop.py tells the Planner after
each). A pass starts the reconcile interval after the last one ended, so the passes are the
interval plus their own length apart, as the host's load decides, and which ends one pass sees
decides the start order (scheduling/forecast.py). Without it the forecast drew passes 1 to 2
intervals apart from the read on, a launch at its pass's start: on a quiet host (passes of
0.01-0.2 s) a start was shown up to a pass off, and which ends one pass saw with it
(bench/forecast.py, bench/README.md). Kept in the process whose controller passes; a process
without one (another API worker) forecasts without it; the queue's worker process is sent the
told policy with each computation it is asked (capacity/queue_process.py)."""
from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import replace

from service.scheduling.model import Policy

WINDOW = 20      # the recent full passes of each kind whose lengths are played (a load's change is seen within them)
LEAST = 3        # fewer passes heard: nothing said (the first passes read cold caches)


class PassClock:
    """Per backend: the last WINDOW full passes' own lengths, those that launched apart, and when
    the last one ended (epoch seconds). Told by the controller's thread, read by the queue's: one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._took: dict[tuple[str, bool], deque[float]] = {}
        self._ended: dict[str, float] = {}

    def heard(self, backend: str, took: float, ended_at: float, launched: bool = False) -> None:
        with self._lock:
            self._took.setdefault((backend, launched), deque(maxlen=WINDOW)).append(max(0.0, took))
            self._ended[backend] = ended_at

    def told(self, policy: Policy, backend: str) -> Policy:
        """The policy with what the backend's passes said (Policy.pass_took: the 10th and 90th
        percentile of the recent lengths of passes that launched nothing, one slow pass is no rule;
        launch_took: the median of those that launched, where a few did; next_pass_at: the last
        end plus the interval); as it is where too little was heard."""
        with self._lock:
            took = sorted(self._took.get((backend, False), ()))
            launches = list(self._took.get((backend, True), ()))
            ended = self._ended.get(backend)
        if len(took) < LEAST or ended is None or policy.pass_s <= 0:
            return policy
        low, high = took[len(took) // 10], took[min(len(took) - 1, len(took) * 9 // 10)]
        return replace(policy, pass_took=(low, high), next_pass_at=ended + policy.pass_s,
                       launch_took=statistics.median(launches) if len(launches) >= LEAST else None)
