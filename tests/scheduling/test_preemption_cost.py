"""Less work lost to preemption (issue 52.5), in the pure scheduler: a job runs its minimum
runtime before a preemption for priority may take it (a reclaim does not wait), and the victims
are those that lose the least work (the time since their latest checkpoint), then the youngest."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from service.scheduling.model import Policy, PreemptionKind, Running, Share, Waiting
from service.scheduling.scheduler import schedule
from tests.scheduling.test_properties import _fits_ever, worlds

CORES = {"core": 2}
TEN_MINUTES = Policy(min_runtime_s=600.0)


def run(job_id, team, started, priority=0, **kw):
    return Running(job_id, team, priority, {"core": 1}, started, **kw)


def urgent(team="a", cores=1):
    return Waiting("urgent", team, 100, {"core": cores}, 0.0, may_preempt=True)


def preempted(d):
    return [(p.job_id, p.kind) for p in d.preempt]


def test_a_job_younger_than_the_minimum_runtime_is_not_preempted_for_priority():
    running = [run("young", "a", started=1000.0), run("other", "a", started=1000.0)]
    assert schedule(CORES, {}, running, [urgent()], now=1599.0, policy=TEN_MINUTES).preempt == []
    d = schedule(CORES, {}, running, [urgent()], now=1600.0, policy=TEN_MINUTES)
    assert [p.kind for p in d.preempt] == [PreemptionKind.PRIORITY]


def test_a_priority_class_sets_its_own_minimum_runtime():
    """The policy's ten minutes hold where a job's class sets nothing; a class may ask less or more."""
    old = run("old", "a", started=0.0, min_runtime_s=7200.0)        # ran 1010 s: its class asks two hours
    young = run("young", "a", started=1000.0)                       # ran 10 s
    assert schedule(CORES, {}, [old, young], [urgent()], now=1010.0, policy=TEN_MINUTES).preempt == []
    quick = replace(young, min_runtime_s=0.0)                       # its class lets it go at once
    d = schedule(CORES, {}, [old, quick], [urgent()], now=1010.0, policy=TEN_MINUTES)
    assert preempted(d) == [("young", PreemptionKind.PRIORITY)]


def test_a_reclaim_does_not_wait_for_the_minimum_runtime():
    """Team b's nominal quota is a guarantee: a's borrowed job that started a second ago goes."""
    shares = {"b": Share(nominal={"core": 1})}
    running = [run("a0", "a", started=999.0), run("a1", "a", started=999.0)]
    d = schedule(CORES, shares, running, [Waiting("b0", "b", 0, {"core": 1}, 0.0)], now=1000.0, policy=TEN_MINUTES)
    assert [p.kind for p in d.preempt] == [PreemptionKind.RECLAIM]


def test_the_victim_is_the_one_that_loses_least_work():
    """Same priority: the older job checkpointed a minute ago, the younger never did (its whole
    run since its start would be lost): the older one goes, not the youngest."""
    running = [run("checkpointed", "a", started=0.0, checkpoint_at=3540.0), run("young", "a", started=2000.0)]
    d = schedule(CORES, {}, running, [urgent()], now=3600.0)
    assert preempted(d) == [("checkpointed", PreemptionKind.PRIORITY)]


def test_with_equal_work_lost_the_youngest_goes():
    running = [run("old", "a", started=0.0, checkpoint_at=3000.0), run("young", "a", started=3000.0)]
    d = schedule(CORES, {}, running, [urgent()], now=3600.0)
    assert preempted(d) == [("young", PreemptionKind.PRIORITY)]


def test_priority_still_comes_before_work_lost():
    running = [run("low", "a", started=0.0), run("high", "a", started=3590.0, priority=50)]
    d = schedule(CORES, {}, running, [urgent()], now=3600.0)
    assert preempted(d) == [("low", PreemptionKind.PRIORITY)]


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_no_priority_preemption_before_the_minimum_runtime_and_nobody_starves(world):
    """Generated worlds with a minimum runtime of 2 passes: capacity holds, no preemption for
    priority takes a job that ran less than it, and every job that could ever fit starts."""
    world.policy = replace(world.policy, min_runtime_s=2.0)
    world.run(passes=400)
    assert world.violations == []
    for pass_, victim, _, kind in world.preemptions:
        if kind == PreemptionKind.PRIORITY.value:
            started = max(t for t in world.started[victim] if t <= pass_)
            assert pass_ - started >= 2, (pass_, victim, started)
    for job in world.jobs:
        if _fits_ever(world, job):
            assert job.job_id in world.first_start, f"{job.job_id} never started"
