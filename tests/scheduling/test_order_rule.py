"""docs/DESIGN.md's recipe "A new order rule", done as it says: one Tier in the policy's tiers
(service/scheduling/tiers.py), and the pass, the forecast's play and the queue's priority in parts
all follow it, with no other file changed. And the tiers the API names are the scheduler's."""
from __future__ import annotations

from dataclasses import replace
from typing import get_args

from service.capacity.queue_schemas import Tier as ApiTier
from service.scheduling.factors import factors
from service.scheduling.forecast import explained
from service.scheduling.model import Policy, Running, Waiting
from service.scheduling.scheduler import schedule
from service.scheduling.tiers import TIERS, Tier

POLICY = Policy(starve_after_s=1000.0)
# The new rule: a job of priority 1000 and more goes before every other tier but the nominated
# jobs, oldest first, whatever its team's fair share.
EXPRESS = Tier("express", lambda job, scene: job.priority >= 1000, lambda job, scene: False, by_age=True)
WITH_EXPRESS = replace(POLICY, tiers=(TIERS[0], EXPRESS, *TIERS[1:]))

# Team a holds nothing and b holds a core, so the fair order takes a's job first; b's is urgent.
CAPACITY = {"core": 2}
RUNNING = [Running("rb", "b", 0, {"core": 1}, 0.0)]
WAITING = [Waiting("a1", "a", 10, {"core": 1}, 0.0), Waiting("b1", "b", 1000, {"core": 1}, 5.0)]


def test_without_the_rule_the_fair_order_decides():
    d = schedule(CAPACITY, {}, RUNNING, WAITING, 10.0, POLICY, served={})
    assert [a.job_id for a in d.admit] == ["a1"] and [q.job_id for q in d.queue] == ["b1"]


def test_the_new_rule_is_one_tier_and_the_pass_the_forecast_and_the_parts_follow_it():
    d = schedule(CAPACITY, {}, RUNNING, WAITING, 10.0, WITH_EXPRESS, served={})
    assert [a.job_id for a in d.admit] == ["b1"] and [q.job_id for q in d.queue] == ["a1"]

    played = explained(CAPACITY, {}, RUNNING, WAITING, 10.0, WITH_EXPRESS, served={})
    assert [q.job_id for q in played.queue] == ["a1"] and played.queue[0].position == 1

    order = ["b1", "a1"]
    parts = factors(CAPACITY, {}, RUNNING, WAITING, order, 10.0, WITH_EXPRESS, served={})
    assert parts["b1"].tier == "express" and parts["a1"].tier == "fair"
    assert parts["a1"].decided_by == "tier"


def test_the_api_names_the_schedulers_tiers_in_its_order():
    assert get_args(ApiTier) == tuple(t.name for t in TIERS)
