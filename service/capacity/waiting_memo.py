"""A backend loop's waiting jobs kept between its planning passes (issue 51.3), so that a pass
reads 10,000 waiting rows' ids and stamps, not their demand (JSON), wishes and the rest, and
builds no scheduler value again for a job that did not change.

Each pass still asks the database which jobs wait, in which order, with the same query the
full read sends (the same filters, each team's window, the same order), but for three narrow
columns: the id, `updated_at` and whether the job is nominated (the preempter sets `nominated_at`
without touching `updated_at`). A job whose stamp differs from the one kept, or that is new, is
read whole (its row, as the full read reads it); one no longer listed is forgotten. What else a
waiting job's value depends on (the team names, the capacity's resources, the launch slots) is
the memo's context: any change to it, or most of the queue changed, reads everything again.

So the jobs the plan sees, and their order, are exactly the database's at this pass; only the
decoding of rows written before is saved. The launch's fenced claim (bulk.mark_attempts, the
engine's compare-and-set) stays the guard against a launch from a stale plan, as before."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from service.scheduling.model import Waiting

# Read in one query, not by ids, when more than this share of the listed jobs is new or changed.
FULL_SHARE = 0.5
IN_CHUNK = 500      # ids in one IN (...) list


@dataclass(frozen=True)
class Kept:
    stamp: tuple          # (updated_at, nominated) when it was read
    waiting: Waiting
    accepts: tuple[str, ...] | None
    wish: dict | None


class WaitingMemo:
    """One backend's waiting jobs as of its last planning pass (only the loop thread uses it)."""

    def __init__(self) -> None:
        self._context: Hashable = None
        self._kept: dict[uuid.UUID, Kept] = {}
        # What the last read cost, for tests and the bench: rows read whole, and whether all were.
        self.last_read = 0
        self.last_full = True

    def forget(self) -> None:
        self._context = None
        self._kept = {}

    def waiting(self, context: Hashable, list_ids: Callable[[], list], read_rows: Callable[[list | None], list],
                build: Callable[[Any], Waiting]) -> list[Kept]:
        """Each waiting job's kept value, in the plan's order. `list_ids()`: (id, updated_at,
        nominated) of each waiting job, in the plan's order; `read_rows(ids)`: those jobs' full rows
        (None: every waiting job's, in the plan's order, one query: the full read); `build`: a
        row's scheduler value."""
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
        for i in range(0, len(stale), IN_CHUNK):
            for row in read_rows(stale[i:i + IN_CHUNK]):
                kept[row.id] = self._keep(row, build)
                self.last_read += 1
        # A job listed, then gone before its row was read, waits no more: left out.
        out = [k for job_id, _, _ in listed if (k := kept.get(job_id)) is not None]
        self._kept = {k.waiting.job_id: k for k in out}
        return out

    def _read_all(self, read_rows: Callable[[list | None], list], build: Callable[[Any], Waiting]) -> list[Kept]:
        out = [self._keep(row, build) for row in read_rows(None)]
        self._kept = {k.waiting.job_id: k for k in out}
        self.last_read, self.last_full = len(out), True
        return out

    @staticmethod
    def _keep(row, build: Callable[[Any], Waiting]) -> Kept:
        return Kept((row.updated_at, row.nominated_at is not None), build(row),
                    tuple(a["backend"] for a in row.accepts) if row.accepts else None, row.wish)


