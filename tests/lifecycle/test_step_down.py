"""Stepping down (service/lifecycle/controller.py): at once, whatever the loops are stuck
on, and a late refusal from an old term never deposes a newer one."""

from types import SimpleNamespace

from service.lifecycle import controller as controller_module
from service.lifecycle.admission import Plan
from service.lifecycle.controller import Controller
from service.lifecycle.services import LoopService

NO_PLANS = SimpleNamespace(plan=lambda *args, **kw: Plan())    # the controller always has a planner


class _Leadership:
    def __init__(self):
        self.epochs = iter(range(1, 100))

    def try_acquire(self):
        return next(self.epochs)

    def release(self):
        pass


class _Clock:
    now = 1000.0

    def monotonic(self):
        return self.now


class _Stuck(LoopService):
    """A service whose thread is stuck (a dead connection): stop() waits out its whole timeout,
    on a clock of the test's own."""

    def __init__(self, name, calls, clock):
        super().__init__(interval=1.0)
        self.name = name
        self.calls = calls
        self.clock = clock

    def run_once(self):
        return False

    def stop(self, timeout=15.0):
        self.calls.append((self.name, timeout))
        self.clock.now += timeout


def make(calls, clock=None):
    clock = clock or _Clock()
    return Controller(_Leadership(), {}, None, None, interval=1.0, batch_size=10, planner=NO_PLANS,
                      services=[lambda fence, n=n: _Stuck(n, calls, clock) for n in ("a", "b", "c")])


def test_step_down_asks_every_loop_first_and_waits_for_all_within_one_bound(monkeypatch):
    monkeypatch.setattr(controller_module, "STOP_SECONDS", 6.0)
    clock = _Clock()
    monkeypatch.setattr(controller_module, "time", clock)
    calls = []
    c = make(calls, clock)
    c._promote(1, threads=False)
    assert c.active
    c._demote("the test")
    assert not c.active
    # Every one is told to stop before any is waited for...
    assert calls[:3] == [("a", 0), ("b", 0), ("c", 0)]
    # ...and the waits together stay within the one bound (not 15 s each, as before).
    assert [n for n, _ in calls[3:]] == ["a", "b", "c"]
    assert clock.now - 1000.0 == 6.0   # stuck all three: 6 s in all, not 6 s each


def test_a_late_refusal_from_an_old_term_does_not_depose_the_new_one():
    c = make([])
    c._promote(1, threads=False)
    old_term = c.services["a"].on_deposed
    c._demote("lost the lock")
    c._promote(2, threads=False)
    old_term()   # a thread of term 1, stuck until now, finds its epoch gone
    assert not c._deposed.is_set()
    c.services["a"].on_deposed()   # the current term's own refusal does depose it
    assert c._deposed.is_set()
