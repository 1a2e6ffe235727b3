"""The what-if replay alone (service/capacity/whatif_replay.py): known workloads through the
controller's scheduler on the virtual clock, whose answers are worked out by hand."""
from __future__ import annotations

import pytest

from service.capacity.whatif_replay import PastJob, TooLong, World, replay
from service.scheduling.model import Policy, Share

EVERY_INSTANT = Policy(pass_s=0.0)      # a pass at each event, so the starts are exact


def _job(job_id: str, team: str, at: float, runs: float, cores: int = 1, priority: int = 0) -> PastJob:
    return PastJob(job_id, team, priority, False, {"core": cores}, at, runs)


def test_one_core_runs_two_jobs_one_after_the_other_and_two_cores_side_by_side():
    jobs = [_job("a", "alpha", 0, 10), _job("b", "beta", 0, 10)]
    one = replay(jobs, World({"core": 1}, {}), EVERY_INSTANT, max_preemptions_per_job=3)
    assert sorted(one.values()) == [0, 10]
    assert replay(jobs, World({"core": 2}, {}), EVERY_INSTANT, max_preemptions_per_job=3) == {"a": 0, "b": 0}


def test_a_start_comes_at_the_controllers_next_pass():
    jobs = [_job("a", "alpha", 0.2, 10), _job("b", "alpha", 0.3, 10)]
    starts = replay(jobs, World({"core": 1}, {}), Policy(pass_s=0.5), max_preemptions_per_job=3)
    assert starts == {"a": 0.5, "b": 10.5}


def test_a_preempted_job_runs_what_it_had_left_when_it_starts_again():
    """Beta borrows the only core for 100 s; alpha (nominal 1 core) comes at 10 for 5 s and takes it
    back; beta runs its 90 s left from 15; gamma, come at 20, starts when beta ends at 105 (115 had
    beta run its whole 100 s again)."""
    jobs = [_job("beta-1", "beta", 0, 100), _job("alpha-1", "alpha", 10, 5), _job("gamma-1", "gamma", 20, 1)]
    world = World({"core": 1}, {"alpha": Share(nominal={"core": 1})})
    starts = replay(jobs, world, EVERY_INSTANT, max_preemptions_per_job=3)
    assert starts == {"beta-1": 0, "alpha-1": 10, "gamma-1": 105}


def test_launch_slots_are_capacity_too():
    jobs = [_job(str(i), "alpha", 0, 10) for i in range(3)]
    starts = replay(jobs, World({"core": 8}, {}, slots=2), EVERY_INSTANT, max_preemptions_per_job=3)
    assert sorted(starts.values()) == [0, 0, 10]


def test_a_job_that_never_fits_never_starts_and_the_replay_ends():
    jobs = [_job("huge", "alpha", 0, 10, cores=5), _job("small", "alpha", 1, 10)]
    assert replay(jobs, World({"core": 4}, {}), EVERY_INSTANT, max_preemptions_per_job=3) == {"small": 1}


def test_the_cpu_budget_stops_the_replay_saying_how_far_it_got():
    jobs = [_job("a", "alpha", 7.0, 10)]
    with pytest.raises(TooLong) as stopped:
        replay(jobs, World({"core": 1}, {}), EVERY_INSTANT, max_preemptions_per_job=3, deadline=0.0)
    assert stopped.value.reached == 7.0
