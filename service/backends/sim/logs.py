"""A sim job's log lines: three a replica, made from its run (runs.py) and the clock, so every
process reads the same lines without a file: `started` at its start, `halfway` at half its run,
and at its end how it ended (or `stopped` when it was cancelled or preempted first). A line shows
once its time has come. The cursor counts the lines read of each replica: `<task>=<n>;...`."""
from __future__ import annotations

from collections.abc import Sequence

from service.backends.sim.runs import SimRun, at
from service.core.errors import Invalid, Problem
from service.lifecycle.protocol import LogLine, LogPage


def replica_lines(run: SimRun, task: str, chief: str) -> list[tuple[int, str]]:
    """(unix ms, message) of one replica, in order, whether their time has come or not."""
    secs = run.run_ms / 1000
    lines = [(run.start_ms, f"sim: {task} started; runs {secs:g} s, then the chief exits with status {run.exit_code}"),
             (run.start_ms + run.run_ms // 2, f"sim: {task} halfway ({secs / 2:g} s)")]
    if run.stopped:
        assert run.stop_ms is not None
        return [line for line in lines if line[0] < run.stop_ms] + \
            [(run.stop_ms, f"sim: {task} stopped at once ({run.stopped_by})")]
    if task == chief or run.exit_code == 0:
        end = f"sim: {task} exited with status {run.exit_code}"
    else:
        end = f"sim: {task} stopped: the chief exited with status {run.exit_code}"
    return [*lines, (run.end_ms, end)]


def page(run: SimRun | None, tasks: Sequence[str], chief: str, since: str | None, limit: int,
         now_ms: int) -> LogPage:
    """Lines after cursor `since` of `tasks`, oldest first, at most `limit`."""
    offsets = _decode(since)
    if run is None:   # not launched (yet)
        return LogPage([], since or None)
    waiting = []
    for order, task in enumerate(tasks):
        lines = replica_lines(run, task, chief)
        for n in range(offsets.get(task, 0), len(lines)):
            ms, message = lines[n]
            if ms <= now_ms:
                waiting.append((ms, n, order, task, message))   # same time: line by line
    waiting.sort()
    out = []
    for ms, n, _order, task, message in waiting[:limit]:
        offsets[task] = n + 1
        out.append(LogLine(_encode(offsets), task, "stdout", at(ms), message))
    return LogPage(out, _encode(offsets) if out or since else None, more=len(waiting) > limit)


def check_replica(tasks: Sequence[str], replica: str | None) -> None:
    if replica is not None and replica not in tasks:
        raise Invalid.of([Problem("replica", f"this job has no replica {replica!r}", f"use one of: {', '.join(tasks)}")])


def _decode(since: str | None) -> dict[str, int]:
    if not since:
        return {}
    try:
        return {task: int(n) for task, n in (part.split("=") for part in since.split(";"))}
    except ValueError:
        raise Invalid.of([Problem("since", "not a cursor of the sim backend",
                                  "pass the cursor of a page of this job's logs, or leave it out")]) from None


def _encode(offsets: dict[str, int]) -> str:
    return ";".join(f"{task}={n}" for task, n in sorted(offsets.items()))
