"""The controller loop tells the Planner how long its full passes take and when the last ended
(capacity/passes.py), and the queue's forecast plays passes that long from its next one: without
it the play drew passes 1 to 2 intervals apart from the read on, and on a quiet host every start
was shown later than it came (issue 49.1, bench/forecast.py)."""
from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from service.capacity.passes import LEAST, WINDOW, PassClock
from service.capacity.planner import Planner
from service.capacity.settings import CapacitySettings
from service.capacity.snapshot import Snapshot
from service.lifecycle.loop import BackendLoop
from service.scheduling.model import Policy, Running, Waiting

POLICY = Policy(pass_s=0.5)


def test_nothing_is_told_before_a_few_passes_nor_without_an_interval():
    clock = PassClock()
    for i in range(LEAST - 1):
        clock.heard("sim", 0.02, 100.0 + i)
    assert clock.told(POLICY, "sim") == POLICY
    clock.heard("sim", 0.02, 103.0)
    assert clock.told(Policy(pass_s=0.0), "sim") == Policy(pass_s=0.0)
    assert clock.told(POLICY, "other") == POLICY
    told = clock.told(POLICY, "sim")
    assert told.pass_took == (0.02, 0.02) and told.next_pass_at == pytest.approx(103.5)


def test_the_recent_passes_are_told_one_slow_pass_is_no_rule():
    clock = PassClock()
    for took in [5.0] * WINDOW + [0.01 * i for i in range(WINDOW - 1)] + [3.0]:   # the first 20 fall out
        clock.heard("sim", took, 200.0)
    low, high = clock.told(POLICY, "sim").pass_took
    assert low == pytest.approx(0.02) and high == pytest.approx(0.18)   # 10th and 90th percentile: 3.0 is left out


class _Told(BackendLoop):
    def __init__(self, planner, launches: int = 0):
        super().__init__(SimpleNamespace(name="sim"), None, None, fence=None, interval=30.0, planner=planner)
        self.launches = launches

    def run_once(self):
        return SimpleNamespace(submitted=self.launches)

    def run_admission(self):
        return None


def test_the_loop_tells_the_planner_of_each_full_pass_only_and_whether_it_launched():
    heard = []
    loop = _Told(SimpleNamespace(heard_pass=lambda *args: heard.append(args)))
    before = datetime.now(UTC).timestamp()
    loop._pass()                      # the first pass is a full one
    loop._pass()                      # 30 s before the next full one: an admission pass
    assert len(heard) == 1
    name, took, ended, launched = heard[0]
    assert name == "sim" and 0 <= took < 5 and before <= ended <= datetime.now(UTC).timestamp() and not launched
    _Told(SimpleNamespace(heard_pass=lambda *args: heard.append(args)), launches=2)._pass()
    assert heard[1][3] is True
    _Told(SimpleNamespace())._pass()  # a planner that does not listen (a test's) is left alone


def test_the_passes_that_launch_are_told_apart():
    clock = PassClock()
    for i in range(LEAST):
        clock.heard("sim", 0.02, 100.0 + i)
        assert clock.told(POLICY, "sim").launch_took is None if i < LEAST - 1 else True
    for took in (0.1, 0.3, 0.12):
        clock.heard("sim", took, 104.0, launched=True)
    told = clock.told(POLICY, "sim")
    assert told.pass_took == (0.02, 0.02) and told.launch_took == pytest.approx(0.12)
    assert told.next_pass_at == pytest.approx(104.5)


def test_the_queue_starts_the_next_job_at_the_controllers_next_pass():
    """The Planner's forecast (what GET /v1/queue shows) plays the passes the loop told it of."""
    planner = Planner(CapacitySettings(pass_seconds=0.5))
    now = 1_000.0
    snap = Snapshot("sim", {"core": 1}, {}, [Running("r", "a", 0, {"core": 1}, now - 5, expected_end=now + 60,
                                                     likely_end=now + 0.05)],
                    [Waiting("w", "a", 0, {"core": 1}, now - 1, duration=2.0, limit=4.0)])
    at = datetime.fromtimestamp(now, UTC)
    untold = planner.decide(snap, at).queue[0].likely_start
    for i in range(LEAST):
        planner.heard_pass("sim", 0.01, now - 0.2 - 0.51 * (LEAST - 1 - i))   # the last ended 0.2 s ago
    assert planner.decide(snap, at).queue[0].likely_start == pytest.approx(now + 0.3)
    assert untold > now + 0.5                             # passes 1-2 intervals from the read on
    for _ in range(LEAST):
        planner.heard_pass("sim", 0.1, now - 0.2, launched=True)
    assert planner.decide(snap, at).queue[0].likely_start == pytest.approx(now + 0.4)   # launched at its end
