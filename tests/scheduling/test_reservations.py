"""The first job in the fair order that does not fit keeps what frees (Slurm's backfill
reservation, TRAINJOBS_SCHEDULER_RESERVATIONS): a later job starts before it only in what is not
kept for it, so a 2-core job is no longer passed again and again by 1-core ones, and when it
starts no longer depends on whether two ends fall in the same controller pass (issue 49.1)."""
from __future__ import annotations

from service.scheduling.forecast import play_forward
from service.scheduling.model import Policy, Running, Share, Waiting
from service.scheduling.scheduler import schedule

CORES = {"core": 4}


def run(job_id, team, cores=1, **kw):
    return Running(job_id, team, 0, {"core": cores}, 0.0, **kw)


def wait(job_id, team, cores=1, queued=0.0, **kw):
    return Waiting(job_id, team, 0, {"core": cores}, queued, **kw)


def ids(items):
    return [i.job_id for i in items]


def test_the_first_job_that_does_not_fit_keeps_what_frees_and_a_smaller_one_waits():
    running = [run("r", "c", cores=2)]
    waiting = [wait("big", "a", cores=4, queued=0), wait("small", "b", queued=5)]
    d = schedule(CORES, {}, running, waiting, now=10)
    assert ids(d.admit) == [] and ids(d.queue) == ["big", "small"]
    assert "capacity is kept for it as it frees" in d.queue[0].why
    # 0 reservations: what the scheduler did before (a job that does not fit held back nobody).
    old = schedule(CORES, {}, running, waiting, now=10, policy=Policy(reservations=0))
    assert ids(old.admit) == ["small"]


def test_a_later_job_starts_in_what_is_not_kept():
    capacity = {"core": 4, "gpu": 1}
    running = [Running("r", "c", 0, {"gpu": 1}, 0.0)]
    waiting = [Waiting("big", "a", 0, {"gpu": 1, "core": 2}, 0.0), wait("small", "b", cores=2, queued=5),
               wait("third", "d", queued=6)]
    d = schedule(capacity, {}, running, waiting, now=10)
    # big keeps 2 of the 4 free cores for when the GPU frees; small fits in the other 2, third not.
    assert ids(d.admit) == ["small"] and ids(d.queue) == ["big", "third"]


def test_the_reservation_follows_the_fair_order_not_the_age():
    running = [run("a0", "a", cores=2), run("c0", "c")]
    # Team a already holds half the cores: team b's younger 2-core job is first in the fair order.
    waiting = [wait("a-big", "a", cores=2, queued=0), wait("b-big", "b", cores=2, queued=5),
               wait("c-small", "c", queued=6)]
    d = schedule(CORES, {}, running, waiting, now=10)
    assert ids(d.admit) == []
    by_id = {q.job_id: q for q in d.queue}
    assert "capacity is kept for it" in by_id["b-big"].why and "capacity is kept" not in by_id["a-big"].why


def test_as_many_jobs_keep_capacity_as_the_setting_says():
    capacity = {"core": 4, "gpu": 2}
    running = [Running("r", "c", 0, {"gpu": 2}, 0.0)]
    waiting = [Waiting("g1", "a", 0, {"gpu": 1, "core": 2}, 0.0), Waiting("g2", "b", 0, {"gpu": 1, "core": 2}, 1.0),
               wait("small", "d", queued=5)]
    one = schedule(capacity, {}, running, waiting, now=10)
    assert ids(one.admit) == ["small"]                 # g1 keeps 2 cores; 2 are left
    two = schedule(capacity, {}, running, waiting, now=10, policy=Policy(reservations=2))
    assert ids(two.admit) == []                        # g1 and g2 keep 2 cores each


def test_a_job_inside_its_nominal_quota_still_takes_what_is_kept_for_another_team():
    shares = {"b": Share(nominal={"core": 1})}
    running = [run("r", "c", cores=3)]
    waiting = [wait("big", "a", cores=4, queued=0), wait("b1", "b", queued=5)]
    d = schedule(CORES, shares, running, waiting, now=10)
    assert ids(d.admit) == ["b1"]                      # the guarantee comes before a reservation


def _controller(running, waiting, ends, phase, policy, passes=40, pass_s=0.5):
    """The scheduler pass after pass as the controller runs it, its passes `phase` seconds off the
    play's ticks: the running jobs end at `ends`, a started job runs its `duration` from its pass."""
    started, t = {}, phase
    running, waiting = list(running), list(waiting)
    for _ in range(passes):
        running = [r for r in running if ends[r.job_id] > t]
        d = schedule({"core": 2}, {}, running, waiting, t, policy, explain=False)
        for a in d.admit:
            w = next(w for w in waiting if w.job_id == a.job_id)
            started[w.job_id] = t
            ends[w.job_id] = t + 0.05 + (w.duration or 0)
            running.append(Running(w.job_id, w.team, 0, w.demand, t))
        waiting = [w for w in waiting if w.job_id not in started]
        t += pass_s
    return sorted(started, key=started.get)


def test_the_play_and_the_controller_agree_on_when_a_2_core_job_starts_whatever_the_passes_phase():
    """Two 1-core ends 0.3 s apart fall in one controller pass or in two, depending on the
    passes' phase, which the play cannot know. Before, in two passes the younger 1-core job took
    the first core and the 2-core job waited for the next end; in one pass the 2-core job started."""
    running = [run("r1", "c", likely_end=10.1), run("r2", "c", likely_end=10.4)]
    waiting = [wait("big", "a", cores=2, queued=1.0, duration=5.0), wait("small", "b", queued=2.0, duration=5.0)]
    ends = {"r1": 10.1, "r2": 10.4}
    policy = Policy(pass_s=0.5)
    fc = play_forward({"core": 2}, {}, running, waiting, 0.0, policy, served={})
    assert fc.order == ["big", "small"]
    assert {tuple(_controller(running, waiting, dict(ends), phase, policy)) for phase in (0.0, 0.15, 0.3, 0.45)} \
        == {("big", "small")}
    before = Policy(pass_s=0.5, reservations=0)
    assert {tuple(_controller(running, waiting, dict(ends), phase, before)) for phase in (0.0, 0.15, 0.3, 0.45)} \
        == {("big", "small"), ("small", "big")}
