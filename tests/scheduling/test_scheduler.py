"""The scheduler's decisions on small, hand-checked cases (tests/scheduling/test_properties.py
drives it with generated ones)."""
from __future__ import annotations

from service.scheduling.model import Policy, PreemptionKind, Running, Share, Waiting
from service.scheduling.scheduler import schedule

CORES = {"core": 4}


def run(job_id, team, cores=1, priority=0, started=0.0, **kw):
    return Running(job_id, team, priority, {"core": cores}, started, **kw)


def wait(job_id, team, cores=1, priority=0, queued=0.0, **kw):
    return Waiting(job_id, team, priority, {"core": cores}, queued, **kw)


def ids(items):
    return [i.job_id for i in items]


def test_teams_take_turns_instead_of_first_come_first_served():
    waiting = [wait(f"a{i}", "a", queued=i) for i in range(10)] + [wait("b0", "b", queued=20), wait("b1", "b", queued=21)]
    d = schedule(CORES, {}, [], waiting, now=30)
    assert sorted(ids(d.admit)) == ["a0", "a1", "b0", "b1"]
    assert d.preempt == []
    assert [q.job_id for q in d.queue][:2] == ["a2", "a3"] and d.queue[0].position == 1


def test_weight_gives_a_team_a_larger_share():
    waiting = [wait(f"a{i}", "a", queued=i) for i in range(6)] + [wait(f"b{i}", "b", queued=i) for i in range(6)]
    d = schedule({"core": 6}, {"a": Share(weight=2.0)}, [], waiting, now=10)
    teams = [a.team for a in d.admit]
    assert teams.count("a") == 4 and teams.count("b") == 2


def test_within_a_team_priority_then_age():
    waiting = [wait("old", "a", queued=1), wait("urgent", "a", priority=10, queued=5), wait("older", "a", queued=0)]
    d = schedule({"core": 2}, {}, [], waiting, now=10)
    assert ids(d.admit) == ["urgent", "older"]


def test_a_job_that_does_not_fit_holds_back_no_smaller_job():
    # With no reservation (test_reservations.py: the first one that does not fit keeps what frees).
    d = schedule(CORES, {}, [run("r", "c", cores=2)], [wait("big", "a", cores=4, queued=0), wait("small", "b", queued=5)],
                 now=10, policy=Policy(reservations=0))
    assert ids(d.admit) == ["small"]
    big = d.queue[0]
    assert big.job_id == "big" and "needs 4 cores, 1 free" in big.why


def test_a_starving_job_keeps_the_capacity_that_frees():
    policy = Policy(starve_after_s=60)
    running = [run("r1", "b", cores=3)]
    d = schedule(CORES, {}, running, [wait("big", "a", cores=4, queued=0), wait("small", "c", queued=50)], now=100,
                 policy=policy)
    assert ids(d.admit) == [] and ids(d.queue) == ["big", "small"]
    assert "capacity is kept for it" in d.queue[0].why
    # Before the limit (and with no reservation) the small job would have gone ahead.
    d = schedule(CORES, {}, running, [wait("big", "a", cores=4, queued=0), wait("small", "c", queued=50)], now=30,
                 policy=Policy(starve_after_s=60, reservations=0))
    assert ids(d.admit) == ["small"]


def test_a_team_reclaims_its_nominal_quota_from_the_youngest_borrowed_job():
    shares = {t: Share(nominal={"core": 1}) for t in "abc"}
    running = [run(f"a{i}", "a", started=i) for i in range(4)]       # a0 is inside a's quota, a1-a3 borrowed
    d = schedule(CORES, shares, running, [wait("b0", "b", queued=10)], now=10)
    assert ids(d.admit) == []
    assert [(p.job_id, p.for_job, p.kind) for p in d.preempt] == [("a3", "b0", PreemptionKind.RECLAIM)]
    assert "waiting for 1 preempted job(s) to stop" in d.queue[0].why


def test_no_preemption_for_a_team_that_would_borrow_itself():
    shares = {t: Share(nominal={"core": 1}) for t in "abc"}
    running = [run(f"a{i}", "a", started=i) for i in range(3)] + [run("b0", "b", started=5)]
    d = schedule(CORES, shares, running, [wait("b1", "b", queued=10)], now=10)
    assert d.preempt == [] and ids(d.admit) == []


def test_a_job_inside_its_teams_quota_is_never_preempted_for_another_team():
    shares = {"a": Share(nominal={"core": 2}), "b": Share(nominal={"core": 2})}
    running = [run("a0", "a", started=0), run("a1", "a", started=1), run("b0", "b", cores=2, started=2)]
    d = schedule(CORES, shares, running, [wait("c", "c", priority=100, may_preempt=True, queued=5)], now=10)
    assert d.preempt == [] and ids(d.admit) == []


def test_a_preempting_class_displaces_lower_priority_borrowed_work_and_its_own_teams():
    shares = {"a": Share(nominal={"core": 1})}
    running = [run("a0", "a", started=0), run("a1", "a", started=1, priority=5), run("c0", "c", started=2),
               run("c1", "c", started=3, priority=50)]
    d = schedule(CORES, shares, running, [wait("urgent", "c", cores=2, priority=100, may_preempt=True, queued=9)], now=10)
    # Borrowed jobs of other teams first (a's quota holds its higher-priority a1, so a0 is the borrowed
    # one), then the lowest priority, youngest first; c1 (priority 50) and a1 keep running.
    assert [(p.job_id, p.kind) for p in d.preempt] == [("a0", PreemptionKind.PRIORITY), ("c0", PreemptionKind.PRIORITY)]


def test_as_few_preemptions_as_needed():
    running = [run("small1", "a", started=0, priority=1), run("small2", "a", started=1, priority=1),
               run("pair", "a", cores=2, started=2, priority=2)]
    d = schedule(CORES, {}, running, [wait("u", "a", cores=2, priority=9, may_preempt=True)], now=10)
    # The cheapest order takes small2, small1 (lowest priority) and that is enough; pair keeps running.
    assert sorted(p.job_id for p in d.preempt) == ["small1", "small2"]


def test_a_nominated_job_starts_first_once_its_victims_stopped():
    shares = {t: Share(nominal={"core": 1}) for t in "ab"}
    running = [run(f"a{i}", "a", started=i) for i in range(3)]        # a3 was preempted and has stopped
    waiting = [wait("a-next", "a", queued=0), wait("b0", "b", queued=10, nominated=True)]
    d = schedule(CORES, shares, running, waiting, now=20)
    assert ids(d.admit) == ["b0"]


def test_stopping_victims_hold_their_capacity_and_no_second_preemption_is_made():
    shares = {t: Share(nominal={"core": 1}) for t in "ab"}
    running = [run("a0", "a", started=0), run("a1", "a", started=1), run("a2", "a", started=2),
               run("a3", "a", started=3, stopping=True, stopping_for="b0")]
    d = schedule(CORES, shares, running, [wait("b0", "b", queued=10), wait("x", "x", queued=11)], now=20)
    assert d.admit == [] and d.preempt == []
    assert d.queue[0].job_id == "b0" and "waiting for 1 preempted job(s) to stop" in d.queue[0].why


def test_borrowing_limit():
    shares = {"a": Share(nominal={"core": 1}, borrowing_limit={"core": 1})}
    d = schedule(CORES, shares, [], [wait(f"a{i}", "a", queued=i) for i in range(4)], now=10)
    assert ids(d.admit) == ["a0", "a1"]
    assert "team a may use at most 2 cores (nominal quota + borrowing limit) and uses 2" in d.queue[0].why


def test_lending_limit_keeps_a_teams_idle_quota_for_it():
    shares = {"a": Share(nominal={"core": 2}, lending_limit={"core": 0})}
    d = schedule(CORES, shares, [], [wait(f"b{i}", "b", queued=i) for i in range(4)], now=10)
    assert ids(d.admit) == ["b0", "b1"]
    d = schedule(CORES, shares, [run("b0", "b"), run("b1", "b")], [wait("a0", "a", cores=2)], now=10)
    assert ids(d.admit) == ["a0"]


def test_a_job_larger_than_what_it_could_ever_get_says_so():
    shares = {"a": Share(nominal={"core": 3}, lending_limit={"core": 0})}
    d = schedule(CORES, shares, [], [wait("b0", "b", cores=2)], now=0)
    assert d.admit == [] and "it starts only once the capacity or the quotas grow" in d.queue[0].why


def test_the_queue_says_what_a_job_waits_for_in_words():
    gpus = {"gpu:NVIDIA_TESLA_A100": 4, "vcpu": 64}
    shares = {"vision": Share(nominal={"gpu:NVIDIA_TESLA_A100": 2})}
    demand = {"gpu:NVIDIA_TESLA_A100": 2, "vcpu": 8}
    running = [Running("v0", "vision", 0, demand, 0), Running("n0", "nlp", 0, demand, 1)]
    waiting = [Waiting("n1", "nlp", 0, demand, 2), Waiting("v1", "vision", 0, demand, 3)]
    d = schedule(gpus, shares, running, waiting, now=10, policy=Policy(max_preemptions_per_pass=0))
    by_id = {q.job_id: q for q in d.queue}
    # vision borrows nothing, nlp borrows half the GPUs: vision's job is next.
    assert by_id["v1"].why == ("capacity is kept for it as it frees: later jobs start only in what it does not need; "
                               "needs 2 NVIDIA_TESLA_A100, 0 free; team vision is at its nominal quota; next in line")
    assert by_id["n1"].position == 2 and by_id["n1"].why.endswith("; 1 job ahead")


def test_estimated_start_from_the_running_jobs_time_limits():
    running = [run("r1", "a", cores=2, expected_end=100.0), run("r2", "a", cores=2, expected_end=300.0)]
    waiting = [wait("w1", "b", cores=2, queued=0), wait("w2", "b", cores=2, queued=1), wait("w3", "b", cores=4, queued=2)]
    d = schedule(CORES, {}, running, waiting, now=10)
    starts = {q.job_id: q.estimated_start for q in d.queue}
    assert starts == {"w1": 100.0, "w2": 300.0, "w3": None}


def test_a_borrowed_job_is_reclaimed_however_often_it_was_preempted_before():
    """Issue 47.3: the per-job cap used to shield a borrower for good (three reclaims, or three
    preemptions by its own team's urgent jobs, and the borrowed capacity was never given back)."""
    shares = {t: Share(nominal={"core": 1}) for t in "ab"}
    running = [run("a0", "a", started=0), run("a1", "a", started=1), run("a2", "a", started=2, preemptible=False),
               run("a3", "a", started=3, preemptible=False)]
    d = schedule(CORES, shares, running, [wait("b0", "b", queued=10)], now=10)
    # a3 is the youngest borrowed job: reclaimed, whatever its count.
    assert [(p.job_id, p.kind) for p in d.preempt] == [("a3", PreemptionKind.RECLAIM)]


def test_a_job_preempted_as_often_as_allowed_is_no_longer_preempted_for_priority():
    urgent = wait("u", "a", cores=2, priority=10, queued=5, may_preempt=True)
    full = [run("a0", "a", started=0, preemptible=False), run("a1", "a", started=1, preemptible=False),
            run("a2", "a", cores=2, started=2)]
    d = schedule({"core": 4}, {}, full, [urgent], now=10)
    assert [p.job_id for p in d.preempt] == ["a2"]       # not a0 and a1, younger but capped
    capped = [full[0], full[1], run("a2", "a", cores=2, started=2, preemptible=False)]
    assert schedule({"core": 4}, {}, capped, [urgent], now=10).preempt == []


def test_a_team_below_its_nominal_quota_takes_back_its_quota_not_the_whole_backend():
    """The nominal tier is for jobs that keep their team inside its nominal quota: once a start puts
    the team at its quota, its other jobs wait their turn in the fair order. (The tier used to be
    chosen once, before any start: team a, 1 of its 2 cores held, had all its 1-core jobs in it and
    took the 9 free cores ahead of b and c.)"""
    waiting = [wait(f"a{i}", "a", queued=i) for i in range(20)] + \
        [wait(f"{t}{i}", t, queued=100 + i) for t in "bc" for i in range(5)]
    d = schedule({"core": 10}, {"a": Share(nominal={"core": 2})}, [run("ra", "a")], waiting, now=200)
    teams = [a.team for a in d.admit]
    assert teams[0] == "a" and teams.count("b") == teams.count("c") == 3 and teams.count("a") == 3
