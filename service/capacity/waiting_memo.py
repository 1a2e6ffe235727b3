"""A backend loop's waiting jobs kept between its planning passes (issue 51.3), so that a plan
with 10,000 jobs waiting neither reads their rows (JSON demand, wishes) nor builds their scheduler
values again when they did not change.

A pass first reads one aggregate row over the waiting jobs (the full read's filters: how many, the
sums of their `updated_at` and `created_at`, how many are nominated: the preempter sets
`nominated_at` without touching `updated_at`). Unmoved since the last listing, the last list
stands (listed again every RELIST_SECONDS all the same). Moved, the pass asks which jobs wait, in
which order, with the query the full read sends (the same filters, each team's window, the same
order) but for three narrow columns (id, `updated_at`, nominated), and reads whole only the jobs
new or changed since (all of them in one query past half). What else a job's value depends on
(the team names, the capacity's resources, the launch slots, the held teams, the window) is the
memo's context: any change to it reads everything again.

So the jobs a plan sees, and their order, are the database's at this pass. The launch's fenced
claim (bulk.mark_attempts, the engine's compare-and-set) stays the guard against launching from a
stale plan, as before; a new controller term starts with an empty memo (the loop is new)."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from service.scheduling.model import Waiting

# Read in one query, not by ids, when more than this share of the listed jobs is new or changed.
FULL_SHARE = 0.5
IN_CHUNK = 500      # ids in one IN (...) list
# The jobs are listed again at least this often even while the mark stands still: the mark is
# sums, and two changes that cancel out (a job gone and another come with the same stamps, under
# a stopped test clock) would otherwise go unseen for good. Not the replan period (10 s): the plan
# it makes every 10 s on a quiet backend would list 10,000 jobs each time (~0.1-0.15 s).
RELIST_SECONDS = 60.0


@dataclass(frozen=True)
class Kept:
    stamp: tuple          # (updated_at, nominated) when it was read
    waiting: Waiting
    accepts: tuple[str, ...] | None
    wish: dict | None


class WaitingMemo:
    """One backend's waiting jobs as of its last planning pass (one loop's, one pass at a time)."""

    def __init__(self, relist_seconds: float = RELIST_SECONDS) -> None:
        self.relist_seconds = relist_seconds
        self._context: Hashable = None
        self._kept: dict[uuid.UUID, Kept] = {}
        self._out: list[Kept] = []
        self._mark: tuple | None = None
        self._listed_at = float("-inf")
        # What the last read cost, for tests and the bench: rows read whole, whether all were, and
        # whether the jobs were listed at all (False: the mark had not moved).
        self.last_read = 0
        self.last_full = True
        self.last_listed = True

    def forget(self) -> None:
        self._context = None
        self._kept, self._out, self._mark = {}, [], None

    def waiting(self, context: Hashable, mark: Callable[[], tuple], list_ids: Callable[[], list],
                read_rows: Callable[[list | None], list], build: Callable[[Any], Waiting]) -> list[Kept]:
        """Each waiting job's kept value, in the plan's order. `mark()`: one aggregate row over the
        waiting jobs that moves with any of them (how many, the sums of their stamps, how many are
        nominated): unmoved since the last listing, less than `relist_seconds` ago, the last list
        stands; `list_ids()`: (id, updated_at, nominated) of each waiting job, in the plan's order;
        `read_rows(ids)`: those jobs' full rows (None: every waiting job's, in the plan's order, one
        query: the full read); `build`: a row's scheduler value."""
        clock = time.monotonic()
        moved = mark()
        if context == self._context and self._kept and moved == self._mark \
                and clock - self._listed_at < self.relist_seconds:
            self.last_read, self.last_full, self.last_listed = 0, False, False
            return self._out
        self._mark, self._listed_at, self.last_listed = moved, clock, True
        if context != self._context or not self._kept:
            self._context = context
            return self._read_all(read_rows, build)
        listed = list_ids()
        stale = [job_id for job_id, at, nominated in listed
                 if (k := self._kept.get(job_id)) is None or k.stamp != (at, bool(nominated))]
        if len(stale) > FULL_SHARE * len(listed):
            return self._read_all(read_rows, build)
        kept = self._kept
        self.last_read, self.last_full = 0, False
        read = set()
        for i in range(0, len(stale), IN_CHUNK):
            for row in read_rows(stale[i:i + IN_CHUNK]):
                kept[row.id] = kept_of(row, build)
                read.add(row.id)
        self.last_read = len(read)
        for job_id in set(stale) - read:      # listed, then gone before its row was read: waits no more
            kept.pop(job_id, None)
        self._out = [k for job_id, _, _ in listed if (k := kept.get(job_id)) is not None]
        self._kept = {k.waiting.job_id: k for k in self._out}
        return self._out

    def _read_all(self, read_rows: Callable[[list | None], list], build: Callable[[Any], Waiting]) -> list[Kept]:
        self._out = [kept_of(row, build) for row in read_rows(None)]
        self._kept = {k.waiting.job_id: k for k in self._out}
        self.last_read, self.last_full = len(self._out), True
        return self._out


def kept_of(row, build: Callable[[Any], Waiting]) -> Kept:
    """A waiting job's row as the plan keeps it: its stamp, its scheduler value, the backends it
    accepts (several: placement across backends) and its placement wish."""
    return Kept((row.updated_at, row.nominated_at is not None), build(row),
                tuple(a["backend"] for a in row.accepts) if row.accepts else None, row.wish)
