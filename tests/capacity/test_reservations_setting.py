"""TRAINJOBS_SCHEDULER_RESERVATIONS (docs/queue.md, "Backfill") reaches the passes the controller
and the queue's reads run, and a count outside 0..1000 stops the service at start, naming the
variable (tests/scheduling/test_reservations.py: what a reservation does)."""
from __future__ import annotations

import pytest

from service.capacity.planner import Planner
from service.cli.startup import Refusal, settings_or_refuse
from service.slices import Settings, capacity_settings, get_settings


def test_the_count_reaches_the_planners_policy(monkeypatch):
    monkeypatch.delenv("TRAINJOBS_SCHEDULER_RESERVATIONS", raising=False)
    assert Planner(capacity_settings(Settings())).policy.reservations == 1
    monkeypatch.setenv("TRAINJOBS_SCHEDULER_RESERVATIONS", "0")
    assert Planner(capacity_settings(Settings())).policy.reservations == 0


@pytest.mark.parametrize("value", ["-1", "1001", "one"])
def test_a_count_outside_what_is_allowed_stops_the_start_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("TRAINJOBS_SCHEDULER_RESERVATIONS", value)
    get_settings.cache_clear()
    try:
        with pytest.raises(Refusal, match=rf"TRAINJOBS_SCHEDULER_RESERVATIONS='{value}'"):
            settings_or_refuse()
    finally:
        get_settings.cache_clear()
