"""How long one thread of the API process may hold Python's GIL while another waits
(sys.setswitchinterval), by what the process serves.

Short (TRAINJOBS_GIL_SWITCH_INTERVAL_MS, 0.5 ms) while many log streams are open: the event
loop then writes each batch of lines to thousands of sockets, and a request's thread, after
each of its database round trips, waited up to Python's 5 ms for the GIL behind those writes
(GET p99 156 ms beside 5,000 followers, 44 ms with 0.5 ms: bench/README.md).

Python's own otherwise: with 0.5 ms the request threads of a burst of submits switched ten
times as often for nothing (there is no long writer to wait behind), and a submit cost 13 %
more CPU (bench/README.md, issue 39). TRAINJOBS_GIL_FAST_SWITCH_STREAMS says from how many
open streams the short interval applies (0: always)."""
from __future__ import annotations

import sys


class GilSwitch:
    def __init__(self, fast_seconds: float, streams: int) -> None:
        self.fast = fast_seconds
        self.threshold = streams
        self.normal: float | None = None   # the interval found at start (Python's own), restored at the end
        self.open = 0
        self._fast_now = False

    def start(self) -> None:
        """The app serves from now: the interval follows the streams until stop()."""
        self.normal = sys.getswitchinterval()
        self._fast_now = False
        self._apply()

    def stop(self) -> None:
        if self.normal is not None:
            sys.setswitchinterval(self.normal)
            self.normal = None

    def streams(self, open_now: int) -> None:
        """The log streams this process has open (service/web/overload.py counts them)."""
        self.open = open_now
        self._apply()

    def _apply(self) -> None:
        if self.normal is None:
            return   # not serving (a test's app not started, or stopped)
        fast = self.open >= self.threshold
        if fast != self._fast_now:
            self._fast_now = fast
            sys.setswitchinterval(self.fast if fast else self.normal)
