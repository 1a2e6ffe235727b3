"""Properties of one pass over several backends (scheduling/across.py, issue 52.1) over generated
worlds: two or three backends, each with its capacity, shares and running jobs; waiting jobs that
accept one backend or several, most preferred first.

- capacity is never exceeded on any backend;
- a job is admitted on at most one backend, and only on one it accepts;
- a world whose jobs each accept one backend is decided exactly as each backend alone;
- a team inside its nominal quota on a backend gets it back: where the backend alone would start
  one of the team's jobs inside the quota (or preempt for it), the pass across backends starts or
  preempts for one of the team's jobs that waited there, there or on another backend it accepts."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.scheduling.across import Side, across
from service.scheduling.model import Policy, Running, Share, Waiting
from service.scheduling.scheduler import schedule

TEAMS = ["a", "b", "c"]
BACKENDS = ["x", "y", "z"]
POLICY = Policy(max_preemptions_per_pass=4)


@st.composite
def worlds(draw, several: bool = True):
    names = BACKENDS[:draw(st.integers(2, 3))]
    sides = []
    for name in names:
        capacity = {"core": draw(st.integers(1, 8))}
        shares, left = {}, capacity["core"]
        for t in TEAMS:
            nominal = draw(st.integers(0, left))
            left -= nominal
            shares[t] = Share({"core": nominal}, {}, {}, 1.0)
        running, held = [], 0
        for i in range(draw(st.integers(0, 4))):
            core = draw(st.integers(1, 3))
            if held + core > capacity["core"]:
                break
            held += core
            running.append(Running(f"{name}-r{i}", draw(st.sampled_from(TEAMS)), draw(st.integers(0, 3)),
                                   {"core": core}, started_at=float(i)))
        sides.append((name, capacity, shares, running))
    waiting: dict[str, list] = {n: [] for n in names}
    accepts: dict[str, list[str]] = {}
    for i in range(draw(st.integers(1, 12))):
        job = Waiting(f"w{i}", draw(st.sampled_from(TEAMS)), draw(st.integers(0, 3)),
                      {"core": draw(st.integers(1, 3))}, queued_at=10.0 + i, may_preempt=draw(st.booleans()))
        chosen = draw(st.permutations(names))[:draw(st.integers(1, len(names) if several else 1))]
        for n in chosen:
            waiting[n].append(job)
        if len(chosen) > 1:
            accepts[job.job_id] = list(chosen)
    return [Side(n, c, s, r, waiting[n]) for n, c, s, r in sides], accepts


def _held(side: Side, admitted: list[str]) -> int:
    demand = {w.job_id: w.demand["core"] for w in side.waiting}
    return sum(r.demand["core"] for r in side.running) + sum(demand[j] for j in admitted)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_capacity_kept_and_one_backend_at_most(world):
    sides, accepts = world
    result = across(sides, accepts, 100.0, POLICY)
    seen: dict[str, str] = {}
    for side in sides:
        admitted = [a.job_id for a in result.decisions[side.name].admit]
        assert _held(side, admitted) <= side.capacity["core"], side.name
        for job in admitted:
            assert job not in seen, f"{job} admitted on {seen[job]} and {side.name}"
            seen[job] = side.name
            assert any(w.job_id == job for w in side.waiting)
            if job in accepts:
                assert result.placed[job] == side.name


@settings(max_examples=200, deadline=None)
@given(worlds(several=False))
def test_jobs_of_one_backend_are_decided_as_before(world):
    sides, accepts = world
    assert accepts == {}
    result = across(sides, accepts, 100.0, POLICY)
    for side in sides:
        alone = schedule(side.capacity, side.shares, side.running, side.waiting, 100.0, POLICY, explain=False)
        assert result.decisions[side.name] == alone


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_a_team_inside_its_nominal_quota_gets_it_back(world):
    sides, accepts = world
    result = across(sides, accepts, 100.0, POLICY)
    served_across = {a.job_id for d in result.decisions.values() for a in d.admit} | \
        {p.for_job for d in result.decisions.values() for p in d.preempt}
    for side in sides:
        holds: dict[str, int] = {}
        for r in side.running:
            holds[r.team] = holds.get(r.team, 0) + r.demand["core"]
        alone = schedule(side.capacity, side.shares, side.running, side.waiting, 100.0, POLICY, explain=False)
        served = {a.job_id for a in alone.admit} | {p.for_job for p in alone.preempt}
        for team in TEAMS:
            theirs = [w for w in side.waiting if w.team == team]
            inside = [w for w in theirs if w.job_id in served
                      and holds.get(team, 0) + w.demand["core"] <= side.shares[team].nominal["core"]]
            if inside and not served_across & {w.job_id for w in theirs}:
                # The backend alone would start one of them inside the quota (or preempt for it): the
                # pass across backends starts or preempts for one of the team's jobs that waited
                # here (here or on another backend it accepts: the same team's jobs may swap places),
                # or it frees as much here for the next pass (a preemption made for another job:
                # the team's job starts in what it frees, as on one backend).
                stopping = {p.job_id for p in result.decisions[side.name].preempt}
                alone_stopping = {p.job_id for p in alone.preempt}
                freed = sum(r.demand["core"] for r in side.running if r.job_id in stopping)
                assert alone_stopping and freed >= sum(r.demand["core"] for r in side.running
                                                       if r.job_id in alone_stopping), \
                    f"team {team}, inside its quota on {side.name}, got nothing: {sides!r} {accepts!r}"
