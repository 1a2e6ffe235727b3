"""The queue's computations, one per backend, asked by one thread of their own: many readers of
GET /v1/queue, of waiting jobs' views and of /ui/queue cost one planner pass per backend per
TRAINJOBS_QUEUE_CACHE_SECONDS at most, never on a reader's request. Read-only: the planner's
snapshot and decision, never a write (the controller alone acts). In the app each computation
runs in the queue's worker process (capacity/queue_process.py: this thread only waits on its
pipe, so the computation holds none of this process's GIL); without one (tests), on this thread.

A reader never computes. It takes the latest finished computation (its `computed_at` says how
old); one older than TRAINJOBS_QUEUE_CACHE_SECONDS asks the thread for another and is still
served. The thread computes one backend at a time, and, while readers are being served, no
sooner than its last computation's own length after it ended (the controller's rule,
lifecycle/loop.py `_settle`; TRAINJOBS_QUEUE_BUSY_SHARE, 0.5, sets that share). Only a reader
with nothing to be shown waits (the first after start, the first after an operator's change, or
every read with the TTL 0), for a computation begun after it arrived, at most
TRAINJOBS_QUEUE_WAIT_SECONDS (then 503). A failed computation (a dead or hung worker included)
answers its waiting readers 503; the others keep the last one.

An operator's change clears the domain's cache (capacity/cache.py, after its commit): a
computation that began before the clear may have read the old rows, so it is shown only to the
readers that arrived before the clear; a later reader waits for one begun after it. Each
computation comes made ready for its pages (capacity/queue_pages.py)."""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from service.capacity.cache import TtlCache
from service.capacity.planner import Planner
from service.capacity.queue_pages import Prepared
from service.capacity.queue_process import QueueProcess
from service.capacity.queue_schemas import QueuePlace
from service.capacity.queue_worker import compute
from service.core.clock import utcnow
from service.core.errors import Unavailable
from service.core.off_seat import waiting_elsewhere
from service.lifecycle.protocol import Backend

log = logging.getLogger("trainjobs.capacity.queue")


@dataclass(frozen=True)
class _Done:
    """One finished computation (its `prepared`) or failure (its `error`)."""
    started: float          # monotonic: when it began (what it read is that old)
    generation: int         # the cache's clears before it began
    prepared: Prepared | None = None
    error: BaseException | None = None


class QueueCache:
    def __init__(self, planner: Planner, session_factory: sessionmaker[Session], cache: TtlCache, *,
                 wait_seconds: float = 30.0, busy_share: float = 0.5, now: Callable[[], datetime] = utcnow,
                 clock: Callable[[], float] = time.monotonic,
                 slots: Callable[[str], int | None] = lambda backend: None, worker: QueueProcess | None = None) -> None:
        """`cache`: the domain's (its TTL, and its clears); `slots`: a backend's launch slots
        (None: it runs any number of jobs at once); `worker`: where the computations run (None: here)."""
        self.planner, self.session_factory, self.cache, self.worker = planner, session_factory, cache, worker
        self.wait_seconds, self.now, self.clock, self.slots = wait_seconds, now, clock, slots
        # A refresh waits this many times the last computation's length after it ended: computing
        # then takes at most `busy_share` of the time (0.5: its own length, the controller's rule).
        self.settle = 1 / busy_share - 1
        self.computations = 0               # how many computations finished (tests and metrics read it)
        self.next_start = 0.0               # monotonic: a refresh for served readers begins no sooner
        self._done: dict[str, _Done] = {}   # per backend: the latest computation that finished
        self._failed: dict[str, _Done] = {}  # per backend: the latest that failed
        self._asked: dict[str, bool] = {}   # backends to compute: True where a reader waits
        self._under_way: tuple[str, float, int] | None = None   # the computation being made: backend, start, generation
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def seconds(self) -> float:
        """How long a computation is served before another is asked (the UI refreshes at this pace)."""
        return self.cache.seconds

    def place(self, backend: str, job_id: uuid.UUID, priority_class: str | None) -> QueuePlace:
        """A waiting job's place, for its view (the caller checked the reader may see the job). A job
        the served computation does not hold (submitted or requeued after it began) is said to be
        waiting for the next one, with the served one's time, and asks for it."""
        prepared = self.prepared(backend)
        found = prepared.place(job_id, priority_class)
        if found is not None:
            return found
        with self._cond:
            if not self._closed and backend not in self._asked and (self._under_way or ("",))[0] != backend:
                self._ask(backend, waiting=False)
        return QueuePlace(position=None, ahead=None, computed_at=prepared.computed_at, why=(
            f"waiting; not yet in the queue computed at {prepared.computed_at:%Y-%m-%d %H:%M:%S} UTC (submitted or "
            "requeued since, or past the waiting jobs a pass reads per team): its place comes with a later "
            "computation of the queue"))

    def prepared(self, backend: str) -> Prepared:
        with self._cond:
            if self._closed:
                raise Unavailable("the service is stopping", headers={"Retry-After": "1"})
            self._start()
            arrived, generation = self.clock(), self.cache.generation
            done = self._done.get(backend)
            if done is not None and self._shows(done, arrived, generation):
                assert done.prepared is not None
                if arrived - done.started >= self.seconds and not self._coming(backend, arrived, generation):
                    self._ask(backend, waiting=False)
                return done.prepared
        # Nothing to show yet: it waits for the computation in the queue's worker, and gives its
        # request seat back meanwhile (core/off_seat.py); the lock is let go before a seat is taken again.
        with waiting_elsewhere(), self._cond:
            return self._wait(backend, arrived, generation)

    def _shows(self, done: _Done, arrived: float, generation: int) -> bool:
        """Whether `done` may be shown to a reader that arrived then, after that many clears: not
        across a clear; with the TTL 0, only a computation begun after the reader arrived."""
        return done.generation >= generation and (self.seconds > 0 or done.started >= arrived)

    def _wait(self, backend: str, arrived: float, generation: int) -> Prepared:
        deadline = time.monotonic() + self.wait_seconds     # real seconds, whatever `clock` is
        while True:
            done, failed = self._done.get(backend), self._failed.get(backend)
            if done is not None and self._shows(done, arrived, generation):
                assert done.prepared is not None
                return done.prepared
            if failed is not None and failed.started >= arrived and failed.generation >= generation:
                assert failed.error is not None
                raise failed.error
            if self._closed:
                raise Unavailable("the service is stopping", headers={"Retry-After": "1"})
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unavailable(f"the queue of {backend!r} is still being computed; try again",
                                  headers={"Retry-After": "1"})
            if not self._coming(backend, arrived, generation):
                self._ask(backend, waiting=True)
            self._cond.wait(left)

    def _coming(self, backend: str, arrived: float, generation: int) -> bool:
        """Whether the computation under way will do for a reader that arrived then (readers
        arriving meanwhile ask for no second one)."""
        under_way = self._under_way
        return under_way is not None and under_way[0] == backend and self._shows(
            _Done(under_way[1], under_way[2]), arrived, generation)

    def _ask(self, backend: str, *, waiting: bool) -> None:
        self._asked[backend] = self._asked.get(backend, False) or waiting
        self._cond.notify_all()

    def _start(self) -> None:
        """The thread, started by the first read (a process nobody asks the queue of computes none),
        and started again should it have died (its computations' errors are caught: this is a last resort)."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="trainjobs-queue", daemon=True)
            self._thread.start()

    def close(self, timeout: float | None = None) -> None:
        """Stops the thread (a computation under way ends first; waiting readers get 503)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if self.worker is not None:
            self.worker.close()     # a computation under way ends now (its readers get 503)
        if thread is not None:
            thread.join(self.wait_seconds if timeout is None else timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                backend = self._next()
                if backend is None:
                    return
                started, generation = self.clock(), self.cache.generation
                self._under_way = (backend, started, generation)
            try:
                done = _Done(started, generation, prepared=self._compute(backend))
            except Exception as e:
                if self._closed:    # close() stopped the worker under it: the service is stopping, nothing failed
                    log.info("the queue of %s was being computed as the service stopped", backend)
                else:
                    log.exception("the queue of %s could not be computed", backend)
                done = _Done(started, generation, error=e)
            ended = self.clock()
            with self._cond:
                if done.error is None:
                    self._done[backend] = done
                    self.computations += 1
                else:
                    self._failed[backend] = done
                self._under_way = None
                self.next_start = ended + self.settle * (ended - started)
                self._cond.notify_all()

    def _next(self) -> str | None:
        """The next backend to compute, once it is due (a waiting reader's at once, a refresh at
        next_start); None once closed. Called holding the lock."""
        while not self._closed:
            urgent = [b for b, waiting in self._asked.items() if waiting]
            if urgent:
                del self._asked[urgent[0]]
                return urgent[0]
            if self._asked:
                left = self.next_start - self.clock()
                if left <= 0:
                    backend = next(iter(self._asked))
                    del self._asked[backend]
                    return backend
                self._cond.wait(left)
            else:
                self._cond.wait()
        return None

    def _compute(self, backend: str) -> Prepared:
        if self.worker is not None:
            return self.worker.compute(backend, self.slots(backend), self.planner.passes.told(self.planner.policy, backend))
        return compute(self.planner, self.session_factory, backend, self.slots(backend), self.now())


def launch_slots(backends: Mapping[str, Backend], backend: str) -> int | None:
    """The backend's limit on the jobs it runs at once (TRAINJOBS_LOCAL_MAX_RUNNING_JOBS, say), which
    the scheduler arbitrates as the launch slots; the running jobs holding them are in the snapshot."""
    found = backends.get(backend)
    return found.capabilities.max_running if found is not None else None
