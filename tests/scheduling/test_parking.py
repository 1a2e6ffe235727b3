"""Issue 51.3: the fair tier parks a team whose next jobs could only wait (scheduler.py
`_fair_order`): the decisions are those of the pass that looks at every job (on generated worlds
of few kinds of jobs, where parking happens, and where the ledger changes while teams are parked),
and a queue of 10,000 jobs of 50 teams at their limits costs a look per team, not per job."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.scheduling.model import SLOT, Policy, Running, Share, Waiting
from service.scheduling.scheduler import _Pass

TEAMS = ["a", "b", "c", "d", "e"]
_CONSIDER = _Pass._consider


@st.composite
def worlds(draw):
    capacity = {"core": draw(st.integers(2, 14))}
    teams = TEAMS[:draw(st.integers(1, 5))]
    shares = {}
    for t in teams:
        nominal = {"core": draw(st.integers(0, 3))}
        borrowing = {"core": draw(st.integers(0, 4))} if draw(st.booleans()) else {}
        shares[t] = Share(nominal, borrowing, {}, draw(st.sampled_from([1.0, 2.0])))
    slots = draw(st.booleans())
    if slots:
        capacity[SLOT] = draw(st.integers(1, 12))
    extra = {SLOT: 1} if slots else {}
    running = [Running(f"r{i}", draw(st.sampled_from(teams)), draw(st.integers(0, 3)),
                       {"core": draw(st.integers(1, 3)), **extra}, float(draw(st.integers(0, 50))),
                       preemptible=draw(st.booleans()))
               for i in range(draw(st.integers(0, 10)))]
    waiting = [Waiting(f"w{i}", draw(st.sampled_from(teams)), draw(st.sampled_from([0, 0, 0, 1, 3])),
                       {"core": draw(st.sampled_from([1, 1, 2, 3])), **extra}, float(draw(st.integers(0, 100))),
                       may_preempt=draw(st.integers(0, 9)) == 0, nominated=draw(st.integers(0, 19)) == 0)
               for i in range(draw(st.integers(1, 60)))]
    policy = Policy(starve_after_s=draw(st.sampled_from([30.0, 1e9])), max_preemptions_per_pass=draw(st.integers(0, 4)),
                    reservations=draw(st.integers(0, 2)))
    return capacity, shares, running, waiting, policy


def _decided(world, parking: bool, monkeypatch):
    """The decision, what still waits, and every look that could decide something: a job looked at
    while its kind is not known hopeless at the ledger's version (a look that only waits is what
    parking saves), with that version, in order."""
    capacity, shares, running, waiting, policy = world
    looks: list = []

    def watched(self, job, urgent):
        if urgent or job.may_preempt or self.hopeless.get(job.kind) != self.ledger.version:
            looks.append((job.job_id, urgent, self.ledger.version))
        return _CONSIDER(self, job, urgent=urgent)
    monkeypatch.setattr(_Pass, "_consider", watched)
    p = _Pass(capacity, shares, running, waiting, 120.0, policy, {})
    p.parking = parking
    d = p.run(explain=False)
    return ([(a.job_id, a.why) for a in d.admit], [(x.job_id, x.for_job, x.kind) for x in d.preempt],
            sorted((job.job_id, note) for job, note in p.left), looks)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_parking_decides_what_looking_at_every_job_decides(world):
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _decided(world, True, monkeypatch) == _decided(world, False, monkeypatch)


def test_ten_thousand_jobs_of_teams_at_their_limits_cost_a_look_per_team(monkeypatch):
    teams = [f"t{i:02d}" for i in range(50)]
    shares = {t: Share({"core": 2}, {"core": 0}) for t in teams}
    running = [Running(uuid.uuid4(), t, 0, {"core": 1}, 0.0) for t in teams for _ in range(2)]
    waiting = [Waiting(uuid.uuid4(), t, 0, {"core": 1}, float(i)) for i in range(200) for t in teams]
    looked: list = []
    monkeypatch.setattr(_Pass, "_consider", lambda self, job, urgent: looked.append(job) or _CONSIDER(self, job,
                                                                                                      urgent=urgent))
    p = _Pass({"core": 1000}, shares, running, waiting, 300.0, Policy(), {})
    assert p.run(explain=False).admit == []
    assert len(looked) == len(teams)             # each team's first job; the rest of each team's could only wait
    assert len(p.left) == len(waiting)           # and every one of them is still waiting
