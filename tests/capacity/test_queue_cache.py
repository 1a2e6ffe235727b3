"""The queue's per-backend cache (service/capacity/queue_cache.py, in the domain's one cache,
capacity/cache.py) over a real database: kept for its TTL, computed afresh after it, one
computation at a time per backend, dropped by a change."""
from __future__ import annotations

import threading

from service.capacity.cache import TtlCache
from service.capacity.planner import Planner
from service.capacity.queue_cache import QueueCache
from service.capacity.settings import CapacitySettings
from tests.capacity.queuekit import set_capacity
from tests.waiting import wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_kept_for_its_ttl_then_computed_afresh(session_factory, db_url):
    clock = Clock()
    cache = QueueCache(Planner(CapacitySettings()), TtlCache(5.0, clock=clock))
    with session_factory() as session:
        first = cache.get(session, "local")
    assert first.snapshot.capacity_source == "none" and cache.computations == 1
    set_capacity(db_url, "local", {"core": 3})
    clock.t += 4.9
    with session_factory() as session:
        assert cache.get(session, "local") is first            # still within the TTL: the same computation
        assert cache.computations == 1
        other = cache.get(session, "vertex")                   # each backend its own entry
        assert other.backend == "vertex" and cache.computations == 2
        clock.t += 0.1
        again = cache.get(session, "local")
    assert again is not first and again.snapshot.capacity == {"core": 3} and cache.computations == 3


def test_zero_seconds_computes_every_read(session_factory):
    cache = QueueCache(Planner(CapacitySettings()), TtlCache(0.0))
    with session_factory() as session:
        cache.get(session, "local")
        cache.get(session, "local")
    assert cache.computations == 2


class GatedPlanner(Planner):
    """Holds the first computation until the test lets it go."""

    def __init__(self) -> None:
        super().__init__(CapacitySettings())
        self.entered, self.release = threading.Event(), threading.Event()

    def snapshot(self, session, backend, *args, **kw):
        self.entered.set()
        assert self.release.wait(60), "the test never released the computation"
        return super().snapshot(session, backend, *args, **kw)


def test_one_computation_at_a_time_per_backend(session_factory):
    """Readers arriving while the backend's queue is being computed wait for that result
    instead of computing it again: eight readers, one computation."""
    planner = GatedPlanner()
    cache = QueueCache(planner, TtlCache(60.0))
    started, results, errors = [], [], []

    def read():
        started.append(1)
        try:
            with session_factory() as session:
                results.append(cache.get(session, "local"))
        except BaseException as e:  # pragma: no cover - shown by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    wait_for(lambda: planner.entered.is_set() and len(started) == 8, "every reader to start")
    planner.release.set()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 8
    assert cache.computations == 1 and all(r is results[0] for r in results)


def _readers(cache, session_factory, n):
    started, results, errors = [], [], []

    def read():
        started.append(1)
        try:
            with session_factory() as session:
                results.append(cache.get(session, "local"))
        except BaseException as e:  # pragma: no cover - shown by the assertion below
            errors.append(e)
    threads = [threading.Thread(target=read) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, started, results, errors


def test_readers_take_a_computation_that_took_longer_than_the_ttl(session_factory):
    """A computation longer than the TTL (the forecast's, under load): the readers that waited
    for it take its result; each used to find it stale and compute again in turn (8 readers
    queued behind 7 computations, p99 30 s in bench/queue_scale.py)."""
    clock, planner = Clock(), GatedPlanner()
    cache = QueueCache(planner, TtlCache(2.0, clock=clock))
    threads, started, results, errors = _readers(cache, session_factory, 8)
    wait_for(lambda: planner.entered.is_set() and len(started) == 8, "every reader to start")
    clock.t += 5.0                                  # it takes 5 s
    planner.release.set()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 8
    assert cache.computations == 1 and all(r is results[0] for r in results)


def test_a_stale_result_is_read_while_another_reader_computes(session_factory):
    clock, planner = Clock(), GatedPlanner()
    planner.release.set()
    cache = QueueCache(planner, TtlCache(2.0, clock=clock))
    with session_factory() as session:
        first = cache.get(session, "local")
    clock.t += 3.0                                  # stale now
    planner.entered.clear()
    planner.release.clear()
    threads, started, results, errors = _readers(cache, session_factory, 1)
    wait_for(planner.entered.is_set, "a reader to recompute")
    with session_factory() as session:
        assert cache.get(session, "local") is first     # at once, not behind the computation
    planner.release.set()
    for t in threads:
        t.join(60)
    assert not errors and results[0] is not first and cache.computations == 2


def test_a_change_drops_the_queue_and_a_computation_across_it_is_not_kept(session_factory, db_url):
    """The operator's change clears the domain's cache (after its commit): the next read computes
    the queue from the new rows, and a computation that began before the clear (it may have read
    the old rows) is handed to its reader but not kept for the next."""
    planner = GatedPlanner()
    planner.release.set()
    cache = QueueCache(planner, TtlCache(60.0))
    with session_factory() as session:
        first = cache.get(session, "local")
    set_capacity(db_url, "local", {"core": 3})
    cache.cache.clear()
    with session_factory() as session:
        assert cache.get(session, "local").snapshot.capacity == {"core": 3} and cache.computations == 2
    cache.cache.clear()
    planner.entered.clear()
    planner.release.clear()
    threads, _, results, errors = _readers(cache, session_factory, 1)
    wait_for(planner.entered.is_set, "a reader to compute")
    cache.cache.clear()                             # a change lands while it computes
    planner.release.set()
    for t in threads:
        t.join(60)
    assert not errors and results[0] is not first and cache.computations == 3
    with session_factory() as session:
        cache.get(session, "local")
    assert cache.computations == 4                  # what was computed across the change was not kept
