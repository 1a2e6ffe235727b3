"""Every submit wakes the controller's loop; a burst of them must cost one pass per
TRAINJOBS_RECONCILE_WAKE_GAP_SECONDS, not one each, and a pass of admission only: the full
pass (cancels, polling) keeps its interval (service/lifecycle/loop.py)."""
import queue
import time
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from service.lifecycle.controller import Controller
from service.lifecycle.loop import BackendLoop, gap_left
from service.lifecycle.wake import ADMIT_SUFFIX
from service.slices import Settings


def test_a_pass_waits_out_the_gap_after_the_previous_one():
    assert gap_left(previous_end=100.0, now=100.01, gap=0.05) == pytest.approx(0.04)
    assert gap_left(previous_end=100.0, now=100.05, gap=0.05) == 0.0
    assert gap_left(previous_end=100.0, now=100.5, gap=0.05) == 0.0   # the interval passed: no wait
    assert gap_left(previous_end=100.0, now=100.0, gap=0.0) == 0.0    # 0 turns it off


def test_the_gap_is_a_bounded_setting(monkeypatch):
    assert Settings().reconcile_wake_gap_seconds == 0.05
    monkeypatch.setenv("TRAINJOBS_RECONCILE_WAKE_GAP_SECONDS", "0.2")
    assert Settings().reconcile_wake_gap_seconds == 0.2
    for bad in ("-1", "60"):
        monkeypatch.setenv("TRAINJOBS_RECONCILE_WAKE_GAP_SECONDS", bad)
        with pytest.raises(ValidationError):
            Settings()


class _Recording(BackendLoop):
    """The loop's thread as it is; the passes only say which kind ran."""

    def __init__(self):
        super().__init__(SimpleNamespace(name="local"), None, None, fence=None, interval=30.0, wake_gap=0.0,
                         planner=SimpleNamespace(plan=None))    # never asked: its passes are stubbed
        self.kinds: queue.Queue[str] = queue.Queue()

    def run_once(self):
        self.kinds.put("full")

    def run_admission(self):
        self.kinds.put("admit")


def test_a_submit_wakes_admission_only_and_a_cancel_the_full_pass():
    loop = _Recording()
    loop.start()
    try:
        assert loop.kinds.get(timeout=10) == "full"        # the first pass is a full one
        loop.wake(admit_only=True)                           # a new job
        assert loop.kinds.get(timeout=10) == "admit"
        loop.wake()                                          # a cancel, a tool: everything
        assert loop.kinds.get(timeout=10) == "full"
        loop.wake(admit_only=True)
        loop.wake()                                          # both before the pass: the full one wins
        assert loop.kinds.get(timeout=10) == "full"
    finally:
        loop.stop()
    assert loop.kinds.empty()


def test_a_notify_payload_can_ask_for_admission_only():
    controller = Controller.__new__(Controller)   # only its routing of wake-ups is under test
    controller.loops = {"local": _Recording(), "vertex": _Recording()}
    controller.services = {}
    woken = []
    for name, loop in controller.loops.items():
        loop.wake = lambda admit_only=False, name=name: woken.append((name, admit_only))
    controller.on_notify("local" + ADMIT_SUFFIX)
    controller.on_notify("vertex")
    controller.on_notify("")
    assert woken == [("local", True), ("vertex", False), ("local", False), ("vertex", False)]


class _Slow(_Recording):
    """Its admission passes take 0.3 s: the passes a submit wakes wait at least that long apart."""

    def __init__(self):
        super().__init__()
        self.wake_gap = 0.01
        self.spans: queue.Queue[tuple[float, float]] = queue.Queue()

    def run_admission(self):
        started = time.monotonic()
        time.sleep(0.3)
        self.spans.put((started, time.monotonic()))


def test_passes_woken_early_wait_as_long_as_the_last_one_took():
    # A pass reads the whole queue: with thousands queued and a submit every few ms, passes
    # 0.01 s apart would take the process's time from the requests (bench/README.md).
    loop = _Slow()
    loop.start()
    try:
        assert loop.kinds.get(timeout=10) == "full"
        loop.wake(admit_only=True)
        _, first_end = loop.spans.get(timeout=10)
        loop.wake(admit_only=True)
        second_start, _ = loop.spans.get(timeout=10)
    finally:
        loop.stop()
    assert second_start - first_end >= 0.29
