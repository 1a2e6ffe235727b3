"""The ledger's arithmetic: billing units from a demand, hours split at the clock, decay."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.slices import Settings
from service.usage.billing import DEFAULT_BILLING_WEIGHTS, bucket_age, decayed, split_hours, units_per_hour


def test_units_per_hour_weighs_each_resource_and_any_accelerator_type():
    weights = {"gpu:NVIDIA_TESLA_A100": 10, "gpu:*": 4, "vcpu": 0.1}
    assert units_per_hour({"gpu:NVIDIA_TESLA_A100": 2, "vcpu": 16}, weights) == pytest.approx(21.6)
    assert units_per_hour({"gpu:NVIDIA_L4": 1}, weights) == 4           # no weight of its own: gpu:*
    assert units_per_hour({"core": 8, "slot": 1}, weights) == 0          # no weight: costs nothing
    assert units_per_hour(None, weights) == 0
    assert units_per_hour({"vcpu": True, "gpu:*": -1}, weights) == 0     # not counts


def test_the_defaults_price_every_resource_name_the_backends_use():
    """local: core, gpu; Vertex and Slurm: vcpu, gpu:<TYPE> (the demand functions' names)."""
    w = Settings().usage_billing_weights
    assert w == DEFAULT_BILLING_WEIGHTS
    for demand, units in (({"core": 1}, 0.1), ({"gpu": 1}, 10), ({"vcpu": 1}, 0.1), ({"gpu:NVIDIA_TESLA_T4": 1}, 10)):
        assert units_per_hour(demand, w) == pytest.approx(units)


def test_half_of_it_counts_after_one_half_life_a_quarter_after_two():
    assert decayed(80.0, 0, 3600) == 80
    assert decayed(80.0, 3600, 3600) == pytest.approx(40)
    assert decayed(80.0, 7200, 3600) == pytest.approx(20)
    assert decayed(80.0, -5, 3600) == 80   # a bucket "from the future" (a clock step) is not grown


def test_a_run_is_split_at_clock_hours():
    start, end = datetime(2026, 1, 1, 10, 30, tzinfo=UTC), datetime(2026, 1, 1, 12, 15, tzinfo=UTC)
    assert [(h.hour, p) for h, p in split_hours(start, end)] == [(10, 0.5), (11, 1.0), (12, 0.25)]
    assert list(split_hours(end, end)) == []
    hour = datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert bucket_age(hour, datetime(2026, 1, 1, 13, tzinfo=UTC)) == 2 * 3600   # from the hour's end
    assert bucket_age(hour, datetime(2026, 1, 1, 10, 20, tzinfo=UTC)) == 0      # the hour still running


@pytest.mark.parametrize("field,value", [("usage_half_life_seconds", 3599), ("usage_half_life_seconds", 31 * 86_400),
                                         ("usage_recompute_seconds", 301), ("usage_recompute_seconds", 0),
                                         ("usage_billing_weights", {"vcpu": -1}),
                                         ("usage_billing_weights", {"vcpu": float("nan")}),
                                         ("usage_billing_weights", {"": 1})])
def test_settings_out_of_bounds_stop_the_start(field, value):
    with pytest.raises(ValueError, match=field):
        Settings(**{field: value})


def test_a_count_too_large_to_bill_costs_nothing_rather_than_infinity():
    assert units_per_hour({"vcpu": 1e308}, {"vcpu": 1e6}) == 0
    assert units_per_hour({"vcpu": float("inf"), "core": 2}, {"vcpu": 1, "core": 1}) == 2
