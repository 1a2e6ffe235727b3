"""The controller: in every API process a thread that stands for election, and, in
the one process that wins it (per database), runs one BackendLoop per backend.

Losing the lock (its connection, or a fencing refusal) stops the loops at once;
the process goes back to standing for election. Backends' jobs keep running
throughout: a new controller adopts them."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy.orm import Session, sessionmaker

from service.lifecycle import quiet
from service.lifecycle.admission import AdmissionGate, CapacityPlanner
from service.lifecycle.engine import Engine
from service.lifecycle.leader import Leadership
from service.lifecycle.loop import BackendLoop, TickStats
from service.lifecycle.protocol import Backend
from service.lifecycle.services import LoopService, ServiceFactory
from service.lifecycle.wake import parse

log = logging.getLogger("trainjobs.controller")

STOP_SECONDS = 15.0   # the most a step-down waits for its loops to finish what they are doing


class Controller:
    def __init__(self, leadership: Leadership, backends: Mapping[str, Backend],
                 session_factory: sessionmaker[Session], engine: Engine, *, interval: float,
                 batch_size: int, election_interval: float = 2.0, wake_gap: float = 0.0,
                 replan_seconds: float = quiet.REPLAN_SECONDS,
                 on_tick: Callable[[TickStats], None] | None = None,
                 services: Sequence[ServiceFactory] = (), gate: AdmissionGate | None = None,
                 planner: CapacityPlanner, preempt_grace: float = 30.0) -> None:
        self.leadership = leadership
        self.backends = backends
        self.session_factory = session_factory
        self.engine = engine
        self.interval = interval
        self.batch_size = batch_size
        self.election_interval = election_interval
        self.wake_gap = wake_gap
        self.replan_seconds = replan_seconds
        self.on_tick = on_tick
        self.ticks = 0     # passes run, by every loop of this process (metrics, tests)
        self.errors = 0
        self.loops: dict[str, BackendLoop] = {}
        self.service_factories = list(services)   # extra loop services (service.lifecycle.services)
        self.gate = gate   # e.g. team budgets: may hold a job back at launch (lifecycle.admission)
        # Shared capacity (service/capacity): who launches next and who is preempted, every backend.
        self.planner = planner
        self.preempt_grace = preempt_grace   # TRAINJOBS_PREEMPTION_GRACE_SECONDS
        self.services: dict[str, LoopService] = {}
        self.epoch: int | None = None
        self._term: int | None = None   # the epoch being promoted or held (on_deposed's guard)
        self._stop = threading.Event()
        self._deposed = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="controller-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        self._demote("the service is stopping", expected=True)
        self.leadership.release()

    def wake(self, backend: str | None = None, admit_only: bool = False) -> None:
        """Wake `backend`'s loop, or the loop service of that name (None: all); `admit_only`:
        admission is enough (a new job). Callers go through lifecycle.wake.Waker."""
        for name, loop in list(self.loops.items()):
            if backend in (None, "", name):
                loop.wake(admit_only)
        for name, service in list(self.services.items()):
            if backend in (None, "", name):
                service.wake()

    def on_notify(self, payload: str) -> None:
        """A NOTIFY from another process (lifecycle.wake's payload)."""
        woken = parse(payload)
        self.wake(woken.target, woken.admit_only)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.active:
                epoch = self.leadership.try_acquire()
                if epoch is None:
                    self._stop.wait(self.election_interval)
                    continue
                self._promote(epoch)
                continue
            still = self.leadership.check(min(1.0, self.election_interval / 2), self.on_notify)
            if not still or self._deposed.is_set():
                self._demote("lost the controller lock" if not still else "a newer controller took over")
                self.leadership.release()

    def run_once(self) -> TickStats:
        """One pass of every backend's loop, in this thread (tests and tools; the
        election thread need not run). Takes the controller lock if it is free."""
        if not self.active:
            epoch = self.leadership.try_acquire()
            if epoch is None:
                raise RuntimeError("another process controls this database")
            self._promote(epoch, threads=False)
        total = TickStats()
        for loop in list(self.loops.values()):
            s = loop.run_once()
            total.polled += s.polled
            total.changed += s.changed
            total.submitted += s.submitted
            total.errors += s.errors
            total.seconds += s.seconds
        for service in list(self.services.values()):
            service.run_once()
        return total

    def _promote(self, epoch: int, threads: bool = True) -> None:
        with self._lock:
            self._deposed.clear()
            self._term = epoch
            for backend in self.backends.values():
                try:
                    backend.start_controller()
                except Exception:
                    log.exception("backend %s could not start controlling; its jobs wait", backend.name)
            self.loops = {name: BackendLoop(b, self.session_factory, self.engine, fence=epoch,
                                            interval=self.interval, batch_size=self.batch_size,
                                            wake_gap=self.wake_gap, replan_seconds=self.replan_seconds,
                                            on_tick=self._tick,
                                            on_deposed=self._deposed_in(epoch), gate=self.gate,
                                            planner=self.planner, preempt_grace=self.preempt_grace)
                          for name, b in self.backends.items()}
            self.services = {}
            for factory in self.service_factories:
                service = factory(epoch)
                service.on_deposed = self._deposed_in(epoch)
                self.services[service.name] = service
            if threads:
                for loop in self.loops.values():
                    loop.start()
                for service in self.services.values():
                    service.start()
            self.epoch = epoch
        log.info("this process is now the controller (epoch %d)", epoch)

    def _tick(self, stats: TickStats) -> None:
        self.ticks += 1
        self.errors += stats.errors
        if self.on_tick:
            self.on_tick(stats)

    def _demote(self, why: str, expected: bool = False) -> None:
        with self._lock:
            if self.epoch is None:
                return
            epoch, self.epoch = self.epoch, None   # from now on this process does not control
            self._term = None
            # A normal stop is news, not a warning; losing the lock or a takeover is one.
            log.log(logging.INFO if expected else logging.WARNING,
                    "this process stopped being the controller (epoch %d): %s", epoch, why)
            workers: list[BackendLoop | LoopService] = [*self.loops.values(), *self.services.values()]
            self.loops, self.services = {}, {}
            # Ask every thread to stop first, then wait for them together, within one bound:
            # a thread stuck on a dead connection (a partition) must not hold up the others,
            # nor the step-down. One that outlives the wait can change nothing: its writes
            # carry this term's epoch (fencing), and its on_deposed is this term's.
            for worker in workers:
                worker.stop(timeout=0)
            deadline = time.monotonic() + STOP_SECONDS
            for worker in workers:
                worker.stop(timeout=max(0.0, deadline - time.monotonic()))
            for backend in self.backends.values():
                try:
                    backend.stop_controller()
                except Exception:
                    log.exception("backend %s: stop_controller failed", backend.name)

    def _deposed_in(self, epoch: int) -> Callable[[], None]:
        """A loop's on_deposed: steps down the term it was started in, never a later one."""
        def deposed() -> None:
            if self._term == epoch:
                self._deposed.set()
        return deposed
