"""The UI's live feed: which jobs changed, for every open page of this process.

One reader per process polls the jobs whose updated_at moved, one query per
interval however many pages are open, and hands each change to the pages of
the job's team. It runs only while a page listens. A commit can land a little
after the timestamp it writes, so each read looks back LOOKBACK seconds and
skips what it has already handed out."""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from service.jobs import queries
from service.jobs.queries import JobChange
from service.ui.render_format import iso

log = logging.getLogger("trainjobs.ui.feed")
LOOKBACK = timedelta(seconds=5)
QUEUE_SIZE = 1000   # a page this far behind is told to reload instead


def _int(value: Any) -> int | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if 0 <= n <= 2**31 else None


def change(id, state, display_name, updated_at, started_at, ended_at, created_at, epoch, epochs,
           preempted: bool = False) -> dict:
    """One job's news as the pages read it (static/jobs.js; `preempted`: a FAILED attempt whose
    capacity went to another job, shown as PREEMPTED, not as a failure)."""
    return {"id": str(id), "state": state, "display_name": display_name, "updated_at": iso(updated_at),
            "started_at": iso(started_at), "ended_at": iso(ended_at), "created_at": iso(created_at),
            "epoch": _int(epoch), "epochs": _int(epochs), "preempted": preempted}


def change_of(row: JobChange) -> dict:
    return change(row.id, row.state, row.display_name, row.updated_at, row.started_at, row.ended_at,
                  row.created_at, row.epoch, row.epochs, queries.preempted(row.state, row.cause))


@dataclass(eq=False)
class Subscriber:
    team_id: uuid.UUID
    job_id: uuid.UUID | None
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    overflowed: bool = False

    def wants(self, row: JobChange) -> bool:
        return row.team_id == self.team_id and (self.job_id is None or row.id == self.job_id)

    def offer(self, change: dict) -> None:
        try:
            self.queue.put_nowait(change)
        except asyncio.QueueFull:
            self.overflowed = True


class JobFeed:
    def __init__(self, session_factory, interval: float):
        self.session_factory = session_factory
        self.interval = interval
        self.subscribers: set[Subscriber] = set()
        self.reads = 0                       # queries made by the shared reader (tests, metrics)
        self._task: asyncio.Task | None = None
        self._since: datetime = datetime.now(UTC)   # the reader's cursor; reset when a reader starts
        self._handed: dict[uuid.UUID, datetime] = {}

    def subscribe(self, team_id: uuid.UUID, job_id: uuid.UUID | None = None) -> Subscriber:
        sub = Subscriber(team_id, job_id)
        self.subscribers.add(sub)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._since = datetime.now(UTC)
            self._task = loop.create_task(self._run())
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def catch_up(self, team_id: uuid.UUID, job_id: uuid.UUID | None, since: datetime) -> list[dict]:
        """A new page's own read: what changed in its team since the page was rendered."""
        with self.session_factory() as session:
            rows = queries.team_changes_since(session, team_id, job_id, since - LOOKBACK, QUEUE_SIZE)
        return [change_of(r) for r in rows]

    def _read(self) -> list[JobChange]:
        since = self._since - LOOKBACK
        with self.session_factory() as session:
            rows = queries.changes_since(session, since)
        self.reads += 1
        return rows

    async def _run(self) -> None:
        while self.subscribers:
            try:
                rows = await anyio.to_thread.run_sync(self._read)
            except Exception:  # the database may be down for a moment: pages keep what they show
                log.warning("live feed: reading changed jobs failed", exc_info=True)
                rows = []
            self._dispatch(rows)
            await asyncio.sleep(self.interval)

    def _dispatch(self, rows: list[JobChange]) -> None:
        for row in rows:
            if self._handed.get(row.id) == row.updated_at:
                continue
            self._handed[row.id] = row.updated_at
            if row.updated_at > self._since:
                self._since = row.updated_at
            change = None
            for sub in self.subscribers:
                if sub.wants(row):
                    change = change or change_of(row)
                    sub.offer(change)
        horizon = self._since - LOOKBACK * 2
        self._handed = {k: v for k, v in self._handed.items() if v >= horizon}
