"""The queue's per-backend computations (service/capacity/queue_cache.py) over a real database:
made on a thread of their own, never by a reader; the latest served for its TTL and past it
while the next is computed; a cold read waits for one; an operator's change (the domain cache's
clear) is never hidden by a computation across it; the thread ends at close()."""
from __future__ import annotations

import threading
import time

import pytest

from service.capacity.cache import TtlCache
from service.capacity.planner import Planner
from service.capacity.queue_cache import QueueCache
from service.capacity.settings import CapacitySettings
from service.core.errors import Unavailable
from tests.capacity.queuekit import set_capacity
from tests.waiting import wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class GatedPlanner(Planner):
    """Counts its computations and where they ran; holds each one while `release` is clear."""

    def __init__(self, *, held: bool = False) -> None:
        super().__init__(CapacitySettings())
        self.entered, self.release = threading.Event(), threading.Event()
        self.threads: list[str] = []
        if not held:
            self.release.set()

    def snapshot(self, session, backend, *args, **kw):
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        assert self.release.wait(60), "the test never released the computation"
        return super().snapshot(session, backend, *args, **kw)

    def hold(self) -> None:
        self.entered.clear()
        self.release.clear()


@pytest.fixture
def make(session_factory):
    made: list[QueueCache] = []

    def build(planner: Planner, seconds: float, **kw) -> QueueCache:
        cache = QueueCache(planner, session_factory, TtlCache(seconds, clock=kw.get("clock", time.monotonic)), **kw)
        made.append(cache)
        return cache
    yield build
    for cache in made:
        cache.close(10)


def _readers(cache: QueueCache, n: int):
    started, results, errors = [], [], []

    def read():
        started.append(1)
        try:
            results.append(cache.prepared("local"))
        except BaseException as e:  # pragma: no cover - shown by the assertions
            errors.append(e)
    threads = [threading.Thread(target=read) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, started, results, errors


def _join(threads) -> None:
    for t in threads:
        t.join(60)
        assert not t.is_alive()


def test_a_cold_read_waits_for_the_first_computation_made_by_the_thread(make):
    """Eight readers on a cold process: all wait for one computation, made by the queue's own
    thread, and all get it."""
    planner = GatedPlanner(held=True)
    cache = make(planner, 60.0)
    threads, started, results, errors = _readers(cache, 8)
    wait_for(lambda: planner.entered.is_set() and len(started) == 8, "every reader to start")
    assert results == []                               # nothing to show yet: they wait
    planner.release.set()
    _join(threads)
    assert not errors and len(results) == 8 and all(r is results[0] for r in results)
    assert cache.computations == 1 and planner.threads == ["trainjobs-queue"]


def test_readers_never_compute_and_are_served_the_last_result_meanwhile(make, db_url):
    """A stale result asks for the next computation and is served at once, to every reader,
    while the thread computes (held here): the readers neither compute nor wait."""
    clock, planner = Clock(), GatedPlanner()
    cache = make(planner, 2.0, clock=clock)
    first = cache.prepared("local")
    assert cache.computations == 1
    set_capacity(db_url, "local", {"core": 3})
    clock.t += 3.0                                     # stale now
    planner.hold()
    threads, started, results, errors = _readers(cache, 8)
    _join(threads)                                     # returned while the computation is held
    assert not errors and len(results) == 8 and all(r is first for r in results)
    wait_for(planner.entered.is_set, "the thread to begin the next computation")
    assert cache.prepared("local") is first                 # still served while it computes
    planner.release.set()
    wait_for(lambda: cache.computations == 2, "the next computation")
    fresh = cache.prepared("local")
    assert fresh is not first and fresh.capacity == {"core": 3}
    assert cache.computations == 2                     # 10 reads of a stale result: one computation
    assert set(planner.threads) == {"trainjobs-queue"}


def test_a_refresh_waits_its_own_length_after_the_last_one(make):
    """The controller's rule: a refresh for served readers begins no sooner than the last
    computation's length after it ended (here it took 5 s of the clock)."""
    clock = Clock()

    class Slow(GatedPlanner):
        def snapshot(self, session, backend, *args, **kw):
            clock.t += 5.0
            return super().snapshot(session, backend, *args, **kw)
    cache = make(Slow(), 2.0, clock=clock)
    cache.prepared("local")
    assert cache.next_start == pytest.approx(1010.0)    # began at 1000, ended at 1005: not before 1010
    third = make(Slow(), 2.0, clock=clock, busy_share=0.25)
    third.prepared("local")
    assert third.next_start == pytest.approx(1025.0)    # 1005 to 1010, then three times as long: busy a quarter


def test_zero_seconds_shows_each_reader_a_computation_begun_after_it_arrived(make, db_url):
    cache = make(GatedPlanner(), 0.0)
    assert cache.prepared("local").capacity == {}
    set_capacity(db_url, "local", {"core": 3})
    assert cache.prepared("local").capacity == {"core": 3}
    assert cache.computations == 2


def test_each_backend_its_own(make):
    cache = make(GatedPlanner(), 60.0)
    assert cache.prepared("local").backend == "local" and cache.prepared("vertex").backend == "vertex"
    assert cache.prepared("local") is cache.prepared("local") and cache.computations == 2


def test_a_change_is_never_hidden_by_a_computation_across_it(make, db_url):
    """The operator's change clears the domain's cache (after its commit): a reader after it
    waits for a computation begun after it, even one under way when it landed."""
    planner = GatedPlanner()
    cache = make(planner, 60.0)
    first = cache.prepared("local")
    set_capacity(db_url, "local", {"core": 3})
    cache.cache.clear()
    assert cache.prepared("local").capacity == {"core": 3} and cache.computations == 2
    set_capacity(db_url, "vertex", {"core": 5})
    cache.cache.clear()
    planner.hold()
    threads, _, results, errors = _readers(cache, 1)
    wait_for(planner.entered.is_set, "the thread to compute")
    cache.cache.clear()                                # a change lands while it computes
    planner.entered.clear()
    planner.release.set()
    _join(threads)
    assert not errors and results[0] is not first      # the reader from before the change takes it
    wait_for(lambda: cache.computations == 3, "the computation across the change")
    later = cache.prepared("local")                         # not that one: begun before the change
    assert cache.computations == 4 and later is not results[0]


def test_a_cold_read_waits_a_bounded_time(make):
    planner = GatedPlanner(held=True)
    cache = make(planner, 60.0, wait_seconds=0.2)
    with pytest.raises(Unavailable) as e:
        cache.prepared("local")
    assert e.value.status == 503 and e.value.headers == {"Retry-After": "1"}
    planner.release.set()
    wait_for(lambda: cache.computations == 1, "the computation to end")
    assert cache.prepared("local").backend == "local"


def test_a_failed_computation_reaches_its_waiting_reader_and_the_next_read_retries(make):
    class Failing(GatedPlanner):
        fail = True

        def snapshot(self, session, backend, *args, **kw):
            if self.fail:
                self.fail = False
                raise RuntimeError("the database went away")
            return super().snapshot(session, backend, *args, **kw)
    cache = make(Failing(), 60.0)
    with pytest.raises(RuntimeError, match="went away"):
        cache.prepared("local")
    assert cache.prepared("local").backend == "local" and cache.computations == 1


def test_close_stops_the_thread_and_readers_get_a_503(make):
    cache = make(GatedPlanner(), 60.0)
    assert not cache.running                           # nobody read: no thread
    cache.prepared("local")
    assert cache.running
    cache.close(10)
    assert not cache.running
    with pytest.raises(Unavailable):
        cache.prepared("local")


def test_a_cold_read_waits_off_its_request_seat_and_takes_one_again_outside_the_lock(make):
    """A reader with nothing to show waits for the worker's computation without its request seat
    (core/off_seat.py), and takes one again only after it let go of the cache's lock: taking a
    seat waits for other requests, which may be readers needing that lock."""
    from service.core.off_seat import HOOK

    planner = GatedPlanner(held=True)
    cache = make(planner, 60.0)
    calls: list[tuple[str, bool]] = []

    def give_back() -> None:
        calls.append(("off", planner.entered.is_set()))

    def take_again() -> None:
        got: list[bool] = []

        def probe() -> None:     # another thread (the lock is reentrant): is it free?
            got.append(cache._cond.acquire(blocking=False))
            if got[0]:
                cache._cond.release()
        p = threading.Thread(target=probe)
        p.start()
        p.join(30)
        calls.append(("on", got == [True]))

    def read() -> None:
        HOOK.set((give_back, take_again))
        results.append(cache.prepared("local"))
    results: list = []
    t = threading.Thread(target=read)
    t.start()
    wait_for(lambda: planner.entered.is_set() and calls, "the reader to wait")
    assert calls == [("off", False)] or calls == [("off", True)]
    planner.release.set()
    t.join(60)
    assert len(results) == 1 and [c[0] for c in calls] == ["off", "on"] and calls[1][1] is True
    HOOK.set((give_back, take_again))
    cache.prepared("local")                        # a warm read waits for nothing: no seat given back
    assert len(calls) == 2


def test_a_computation_cut_short_by_the_service_stopping_is_no_error(make, caplog):
    """close() (the app's end) stops the worker under a computation: its reader gets a 503 and the
    log says the service stopped, at INFO, with no ERROR and no traceback (a fresh-clone run's
    stopping test found one in the service's log)."""
    import logging

    from service.capacity.queue_process import WorkerFailed

    class Worker:
        def __init__(self) -> None:
            self.entered, self.closed = threading.Event(), threading.Event()

        def compute(self, *args):
            self.entered.set()
            assert self.closed.wait(30)
            raise WorkerFailed("its worker stopped with status -9")

        def close(self) -> None:
            self.closed.set()

    worker = Worker()
    cache = make(Planner(CapacitySettings()), 60.0, worker=worker)
    threads, started, results, errors = _readers(cache, 1)
    assert worker.entered.wait(30)
    with caplog.at_level(logging.INFO, logger="trainjobs.capacity.queue"):
        cache.close(10)
        _join(threads)
    assert results == [] and len(errors) == 1 and isinstance(errors[0], Unavailable)
    mine = [r for r in caplog.records if r.name == "trainjobs.capacity.queue"]
    assert [r.levelname for r in mine] == ["INFO"] and "stopped" in mine[0].getMessage()
    assert all(r.exc_info is None for r in mine)
