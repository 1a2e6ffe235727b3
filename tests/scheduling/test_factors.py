"""Every waiting job's priority in parts (service/scheduling/factors.py), on hand-checked cases: the
tier the scheduler takes it in, then the part that put the job ahead of it there. Each case is
the scheduler's own order (schedule()'s queue), so the parts explain what it decided."""
from __future__ import annotations

from service.scheduling.factors import factors, size
from service.scheduling.model import Policy, Running, Share, Waiting
from service.scheduling.scheduler import schedule

POLICY = Policy(starve_after_s=100.0)


def wait(job_id, team, cores=1, priority=0, queued=0.0, **kw):
    return Waiting(job_id, team, priority, {"core": cores}, queued, **kw)


def run(job_id, team, cores=1, **kw):
    return Running(job_id, team, 0, {"core": cores}, 0.0, **kw)


def parts(capacity, shares, running, waiting, now=10.0, served=None, usage=None, policy=POLICY):
    d = schedule(capacity, shares, running, waiting, now, policy, served=served or {}, usage=usage)
    order = [a.job_id for a in d.admit] + [q.job_id for q in d.queue]
    return order, factors(capacity, shares, running, waiting, order, now, policy, served=served or {}, usage=usage)


def test_within_a_team_priority_then_age_decide():
    order, f = parts({"core": 1}, {}, [run("r", "a")],
                     [wait("old", "a", queued=1), wait("urgent", "a", priority=10, queued=5), wait("older", "a", queued=0)])
    assert order == ["urgent", "older", "old"]
    assert [f[j].decided_by for j in order] == [None, "priority", "age"]
    assert {f[j].tier for j in order} == {"fair"} and f["old"].waited_s == 9.0 and f["urgent"].priority == 10


def test_between_teams_the_fair_share_decides_and_says_the_standing():
    order, f = parts({"core": 4}, {"b": Share(weight=2.0)}, [run("ra", "a", 2), run("rb", "b", 2)],
                     [wait("a1", "a", queued=0), wait("b1", "b", queued=5)])
    assert order == ["b1", "a1"] and f["a1"].decided_by == "fair_share"
    a, b = f["a1"].fair_share, f["b1"].fair_share
    assert (b.rank, b.held, b.weight) == (1, 0.25, 2.0) and (a.rank, a.held, a.borrowed) == (2, 0.5, 0.5)


def test_the_fair_share_says_the_teams_past_use_and_yesterdays_heavy_user_yields():
    """Team a used three times what b used (decayed): its part of the past, 0.75, is added to what
    it holds now, so b goes first and the fair share decided."""
    order, f = parts({"core": 1}, {}, [run("r", "c")], [wait("a1", "a", queued=0), wait("b1", "b", queued=5)],
                     usage={"a": 30.0, "b": 10.0})
    a, b = f["a1"].fair_share, f["b1"].fair_share
    assert order == ["b1", "a1"] and f["a1"].decided_by == "fair_share"
    assert (a.usage, b.usage, a.held, b.held, a.rank, b.rank) == (0.75, 0.25, 0.75, 0.25, 2, 1)
    _, none = parts({"core": 2}, {}, [], [wait("a1", "a")])
    assert none["a1"].fair_share.usage is None


def test_teams_that_stand_alike_take_turns():
    order, f = parts({"core": 2}, {}, [run("ra", "a"), run("rb", "b")],
                     [wait("a1", "a", queued=0), wait("b1", "b", queued=5)], served={"a": 8.0, "b": 3.0})
    assert order == ["b1", "a1"] and f["a1"].decided_by == "turn" and f["a1"].fair_share.rank == 2


def test_the_tiers_come_first_nominated_nominal_starving():
    running = [run("big", "c", 4, stopping=True, stopping_for="n1")]
    waiting = [wait("n1", "c", queued=9), wait("q1", "q", queued=8), wait("s1", "a", queued=-200),
               wait("f1", "b", queued=-5)]
    order, f = parts({"core": 4}, {"q": Share(nominal={"core": 1})}, running, waiting)
    assert order == ["n1", "q1", "s1", "f1"]
    assert [f[j].tier for j in order] == ["nominated", "nominal", "starving", "fair"]
    assert [f[j].decided_by for j in order] == [None, "tier", "tier", "tier"]


def test_a_job_ahead_that_would_come_later_as_things_stand_is_the_forecast():
    """With no reservation (TRAINJOBS_SCHEDULER_RESERVATIONS=0) a job that does not fit holds back
    nobody: the small one behind it starts first."""
    order, f = parts({"core": 4}, {}, [run("r", "a", 3)], [wait("big", "b", 2, queued=0), wait("small", "b", 1, queued=5)],
                     policy=Policy(starve_after_s=100.0, reservations=0))
    assert order == ["small", "big"]
    assert f["big"].decided_by == "forecast" and (f["big"].size, f["small"].size) == (0.5, 0.25)


def test_size_is_the_largest_part_of_an_arbitrated_resource():
    assert size({"core": 4, "#slots": 8}, {"core": 1, "#slots": 1}) == 0.25
    assert size({"#slots": 2}, {"#slots": 1, "gpu": 3}) == 0.5
    assert size({}, {"core": 2}) == 0.0
