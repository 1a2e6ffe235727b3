"""A job's wish among its backends (service/scheduling/preference.py): pure."""
from __future__ import annotations

from service.scheduling.across import Side
from service.scheduling.model import Policy, Running, Waiting
from service.scheduling.preference import Wish, forecast_starts, may_start_on, order, starts_now

NOW = 1_800_000_000.0
LISTED = ("vertex", "slurm", "local")


def test_listed_keeps_the_templates_order_and_says_nothing():
    assert order(LISTED, Wish(), {}, NOW) == (LISTED, "")


def test_cheapest_orders_by_the_price_per_hour_and_names_each():
    names, why = order(LISTED, Wish("cheapest", prices={"vertex": 3.1, "slurm": 0.4, "local": 1.0}), {}, NOW)
    assert names == ("slurm", "local", "vertex")
    assert why == "cheapest: slurm 0.40/h, local 1.00/h, vertex 3.10/h"


def test_cheapest_ties_and_unpriced_backends_keep_the_listed_order():
    names, why = order(LISTED, Wish("cheapest", prices={"slurm": 1.0, "local": 1.0}), {}, NOW)
    assert names == ("slurm", "local", "vertex")   # vertex: no price, last
    assert why.endswith("vertex no price")
    names, _ = order(LISTED, Wish("cheapest", prices={"vertex": 2.0, "slurm": 2.0, "local": 2.0}), {}, NOW)
    assert names == LISTED


def test_soonest_orders_by_the_estimated_start():
    starts = {"vertex": NOW + 1800, "slurm": NOW, "local": None}
    names, why = order(LISTED, Wish("soonest"), starts, NOW)
    assert names == ("slurm", "vertex", "local")
    assert why == "soonest: slurm now, vertex in 30 min, local start not known"


def test_soonest_ties_keep_the_listed_order():
    names, _ = order(LISTED, Wish("soonest"), {n: NOW for n in LISTED}, NOW)
    assert names == LISTED


def test_start_by_met_on_the_preferred_backend_changes_nothing():
    wish = Wish("cheapest", start_by=NOW + 3600, prices={"vertex": 3.0, "slurm": 0.5, "local": 1.0})
    names, why = order(LISTED, wish, {"slurm": NOW + 600, "local": NOW, "vertex": NOW}, NOW)
    assert names == ("slurm", "local", "vertex")
    assert why.endswith("; start by 2027-01-15T09:00:00Z")


def test_start_by_missed_on_the_preferred_backend_takes_the_next_that_meets_it():
    wish = Wish("cheapest", start_by=NOW + 600, prices={"vertex": 3.0, "slurm": 0.5, "local": 1.0})
    names, why = order(LISTED, wish, {"slurm": NOW + 7200, "local": None, "vertex": NOW}, NOW)
    # vertex meets it, local may (no estimate), slurm misses it: last, though cheapest.
    assert names == ("vertex", "local", "slurm")
    assert why.endswith("start by 2027-01-15T08:10:00Z: missed on slurm")


def test_start_by_with_the_listed_order():
    names, why = order(("sim1", "sim2"), Wish(start_by=NOW + 60), {"sim1": NOW + 600, "sim2": NOW}, NOW)
    assert names == ("sim2", "sim1")
    assert why == "start by 2027-01-15T08:01:00Z: missed on sim1"


def test_a_deadline_gone_by_is_missed_where_the_job_cannot_start_now():
    names, why = order(("sim1", "sim2"), Wish(start_by=NOW - 1), {"sim1": None, "sim2": NOW}, NOW)
    assert names == ("sim1", "sim2") and why == "start by 2027-01-15T07:59:59Z: missed on sim1, sim2"
    names, _ = order(("sim1", "sim2"), Wish(start_by=NOW + 60), {"sim1": None, "sim2": NOW + 600}, NOW)
    assert names == ("sim1", "sim2")   # sim1 may meet it (no estimate), sim2 will not


def test_starts_now_where_what_the_job_asks_is_free():
    def side(name: str, free: int) -> Side:
        running = [Running("r", "a", 0, {"core": 4 - free}, started_at=0)] if free < 4 else []
        return Side(name, {"core": 4}, {}, running, [Waiting("j", "a", 0, {"core": 2}, queued_at=0)])
    assert starts_now([side("sim1", 1), side("sim2", 2), side("sim3", 4)], "j", NOW) == \
        {"sim1": None, "sim2": NOW, "sim3": NOW}


def test_with_a_deadline_it_waits_for_the_first_backend_that_meets_it():
    wish = Wish("cheapest", start_by=NOW + 3600, prices={"sim1": 1.0, "sim2": 0.1})
    names, _ = order(("sim1", "sim2"), wish, {"sim1": NOW, "sim2": NOW + 600}, NOW)
    assert names == ("sim2", "sim1")
    assert may_start_on(names, wish, {"sim1": NOW, "sim2": NOW + 600}, NOW) == ("sim2",)   # waits for the cheap one
    # The cheap one would miss it, or has no estimate: the first that admits it, as without a wish.
    assert may_start_on(("sim2", "sim1"), wish, {"sim1": NOW, "sim2": NOW + 7200}, NOW) == ("sim2", "sim1")
    assert may_start_on(("sim2", "sim1"), wish, {"sim1": NOW}, NOW) == ("sim2", "sim1")
    # No deadline, or soonest: never waits.
    assert may_start_on(("sim2", "sim1"), Wish("cheapest"), {"sim2": NOW + 600}, NOW) == ("sim2", "sim1")
    assert may_start_on(("sim2", "sim1"), Wish("soonest", start_by=NOW + 3600), {"sim2": NOW}, NOW) == ("sim2", "sim1")


def test_the_forecast_estimates_each_backends_start():
    # sim1's core is held until NOW + 600 (its time limit); sim2's until NOW + 60.
    def side(name: str, end: float) -> Side:
        running = [Running("r" + name, "a", 0, {"core": 1}, started_at=NOW - 10, expected_end=end)]
        return Side(name, {"core": 1}, {}, running, [Waiting("j", "a", 0, {"core": 1}, queued_at=NOW, duration=60)])
    starts = forecast_starts([side("sim1", NOW + 600), side("sim2", NOW + 60)], ["j"], NOW, Policy(pass_s=0.5))
    assert NOW + 600 <= starts["j"]["sim1"] <= NOW + 610 and NOW + 60 <= starts["j"]["sim2"] <= NOW + 70, starts
    assert order(("sim1", "sim2"), Wish("soonest"), starts["j"], NOW)[0] == ("sim2", "sim1")
