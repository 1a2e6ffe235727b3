"""The loop that moves jobs through their states.

A loop service in the Prefect style: `run_once()` does one full pass and is what
tests call; `start()` runs it every interval on a thread. Each batch of jobs is
one transaction; an error is logged and counted, never raised out of the loop,
and the next pass starts again from the oldest active job."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Mapping

from sqlalchemy import select, tuple_
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from service.backends.base import Backend
from service.jobs.service import HANDLE_COLUMNS, apply_observation, handle_of_row
from service.jobs.states import ACTIVE
from service.models import Job

log = logging.getLogger("trainjobs.reconciler")
APPLY_ATTEMPTS = 3


@dataclass
class TickStats:
    polled: int = 0
    changed: int = 0
    errors: int = 0
    seconds: float = 0.0


class Reconciler:
    def __init__(self, session_factory: sessionmaker[Session], backends: Mapping[str, Backend],
                 interval: float = 0.5, batch_size: int = 500, on_tick=None):
        self.session_factory = session_factory
        self.on_tick = on_tick  # e.g. metrics: called with each pass's TickStats
        self.backends = backends
        self.interval = interval
        self.batch_size = batch_size
        self.ticks = 0
        self.errors = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> TickStats:
        stats = TickStats()
        t0 = time.perf_counter()
        for name, backend in self.backends.items():
            self._reconcile_backend(name, backend, stats)
        stats.seconds = time.perf_counter() - t0
        self.ticks += 1
        self.errors += stats.errors
        if self.on_tick:
            self.on_tick(stats)
        return stats

    def _reconcile_backend(self, name: str, backend: Backend, stats: TickStats) -> None:
        # Optional hook: a backend that lists its jobs in bulk (vertex) lists once per
        # pass and answers every batch of the pass from that listing.
        begin_pass = getattr(backend, "begin_pass", None)
        if begin_pass is not None:
            begin_pass()
        after = None
        while True:
            with self.session_factory() as session:
                # Plain rows, not ORM objects: most active jobs have no news on most
                # passes, and the CustomJob is fetched only for the few that need it.
                q = (select(*HANDLE_COLUMNS)
                     .where(Job.backend == name, Job.state.in_([s.value for s in ACTIVE]))
                     .order_by(Job.created_at, Job.id).limit(self.batch_size))
                if after is not None:
                    q = q.where(tuple_(Job.created_at, Job.id) > after)
                rows = session.execute(q).all()
                session.rollback()  # hold no transaction (nor SQLite snapshot) while the backend works
                if not rows:
                    return
                after = (rows[-1].created_at, rows[-1].id)
                handles = [handle_of_row(session, r) for r in rows]
                stats.polled += len(handles)
                try:
                    observations = backend.poll(handles)
                except Exception:
                    log.exception("backend %s: poll failed; will retry next tick", name)
                    stats.errors += 1
                    return
                session.rollback()  # ends the reads the backend made through lazy handles
                for obs in observations:
                    self._apply(session, obs, stats)
            if len(rows) < self.batch_size:
                return

    def _apply(self, session: Session, obs, stats: TickStats) -> None:
        """One short transaction per observation. On SQLite a write that races another
        connection's commit fails at once ("database is locked", the busy timeout does
        not apply to a stale read snapshot): read again and retry."""
        for attempt in range(APPLY_ATTEMPTS):
            try:
                changed = apply_observation(session, obs)
                session.commit()
            except OperationalError:
                session.rollback()
                if attempt + 1 < APPLY_ATTEMPTS:
                    time.sleep(0.01 * (attempt + 1))
                    continue
                log.exception("job %s: could not apply %s", obs.job_id, obs)
                stats.errors += 1
                return
            except Exception:
                session.rollback()
                log.exception("job %s: could not apply %s", obs.job_id, obs)
                stats.errors += 1
                return
            if changed:
                stats.changed += 1
            return

    def wake(self) -> None:
        """Run the next pass now (e.g. after a submit or cancel)."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="reconciler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # the database may be down: keep looping
                log.exception("reconcile pass failed")
                self.errors += 1
                if self.on_tick:
                    self.on_tick(TickStats(errors=1))
            self._wake.wait(self.interval)
            self._wake.clear()
