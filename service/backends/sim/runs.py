"""A sim run, all of it in its backend reference: when it started, how long it runs (already
scaled by the speed it was launched at), how its chief exits and, once stopped, when and why.

    sim:start=<unix ms>;run=<ms>;exit=<status>[;stop=<unix ms>;by=cancelled|preempted]

So any process (a new controller after a restart, an API process reading logs) knows when each
job ends from the job row alone: nothing on disk, no memory to rebuild. A later change of
TRAINJOBS_SIM_SPEED leaves launched jobs as they were launched."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

SCHEME = "sim:"
STOPS = ("cancelled", "preempted")


class SimRun(NamedTuple):   # a tuple: a poll makes one per job, and a frozen dataclass costs twice as much
    start_ms: int
    run_ms: int
    exit_code: int
    stop_ms: int | None = None
    stopped_by: str | None = None   # one of STOPS, with stop_ms

    @property
    def end_ms(self) -> int:
        """When it ends by itself."""
        return self.start_ms + self.run_ms

    @property
    def stopped(self) -> bool:
        """Stopped before it ended by itself (a stop after its end changed nothing)."""
        return self.stop_ms is not None and self.stop_ms < self.end_ms

    @property
    def over_ms(self) -> int:
        """When it is over, stopped or not."""
        return self.stop_ms if self.stop_ms is not None and self.stopped else self.end_ms

    def stop(self, at_ms: int, by: str) -> SimRun:
        return self._replace(stop_ms=at_ms, stopped_by=by)

    @property
    def ref(self) -> str:
        out = f"{SCHEME}start={self.start_ms};run={self.run_ms};exit={self.exit_code}"
        if self.stop_ms is not None:
            out += f";stop={self.stop_ms};by={self.stopped_by}"
        return out


def parse(ref: str | None) -> SimRun | None:
    """The run a reference describes; None: not one this backend wrote. Fields by position (the
    order ref writes them): a poll parses every running job's reference on every pass."""
    if not ref or not ref.startswith(SCHEME):
        return None
    parts = ref[len(SCHEME):].split(";")
    names = [p.partition("=") for p in parts]
    if [n for n, _, _ in names] not in (["start", "run", "exit"], ["start", "run", "exit", "stop", "by"]):
        return None
    try:
        start, run, code = int(names[0][2]), int(names[1][2]), int(names[2][2])
        if len(names) == 3:
            return SimRun(start, run, code)
        stop, by = int(names[3][2]), names[4][2]
    except ValueError:
        return None
    return SimRun(start, run, code, stop, by) if by in STOPS else None


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
