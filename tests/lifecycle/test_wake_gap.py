"""Every submit wakes the controller's loop; a burst of them must cost one pass per
TRAINJOBS_RECONCILE_WAKE_GAP_SECONDS, not one each (service/lifecycle/loop.py)."""
import pytest
from pydantic import ValidationError

from service.config import Settings
from service.lifecycle.loop import gap_left


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
