"""The planner reads one backend's capacity, shares and jobs from a real database and hands
the pure scheduler's decision to the controller as a Plan: admitted in fair order, preemptions
for a team inside its nominal quota, every other waiting job's place and why."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from service.capacity.planner import Planner
from service.capacity.settings import CapacitySettings
from service.core.clock import utcnow
from service.persistence.models import BackendCapacity, Job, Team, TeamShare
from tests.apikit import DEMO
from tests.conftest import make_token


def _jobs(client, token, n):
    out = []
    for _ in range(n):
        r = client.post("/v1/jobs", json={"template": "mwms-demo"}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201, r.text
        out.append(r.json()["id"])
    return out


def _as_running(session, ids, demand, started_ago_s=0):
    now = utcnow()
    for i, job_id in enumerate(ids):
        session.execute(update(Job).where(Job.id == _id(job_id)).values(
            state="RUNNING", backend_ref=f"ref-{job_id}", demand=demand,
            started_at=now - timedelta(seconds=started_ago_s + i)))


def test_a_team_inside_its_nominal_quota_reclaims_borrowed_capacity(client, db_url, session_factory):
    beta = make_token(db_url, "beta", "admin")
    for token in (_alpha(client), beta):   # each team its own template
        r = client.post("/v1/templates", json=_demo(), headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201, r.text
    alpha_jobs = _jobs(client, _alpha(client), 4)
    beta_jobs = _jobs(client, beta, 2)
    with session_factory() as s:
        s.add(BackendCapacity(backend="local", resource="core", amount=4))
        teams = dict(s.query(Team.name, Team.id).all())
        s.add(TeamShare(team_id=teams["alpha"], backend="local", nominal={"core": 2}))
        s.add(TeamShare(team_id=teams["beta"], backend="local", nominal={"core": 2}))
        s.execute(update(Job).values(demand={"core": 1, "vcpu": 4}))   # vcpu: not in the capacity, not arbitrated
        _as_running(s, alpha_jobs, {"core": 1})                         # alpha holds all 4: 2 borrowed
        s.commit()
    planner = Planner(CapacitySettings())
    with session_factory() as s:
        plan = planner.plan(s, "local", utcnow())
    assert plan.admit == []
    # The two youngest of alpha's jobs (the borrowed ones: started last) go, one for each of beta's.
    assert sorted(str(p.job_id) for p in plan.preempt) == sorted(alpha_jobs[:2])
    assert {str(p.for_job) for p in plan.preempt} == set(beta_jobs)
    assert all(p.kind == "reclaim" for p in plan.preempt)
    assert [plan.waiting[_id(j)].position for j in beta_jobs] == [1, 2]
    first = plan.waiting[_id(beta_jobs[0])]
    assert "preempted" in first.why
    # Expected to start once the preempted job has stopped: its grace period at the latest.
    # The scheduler's Queued, in its own seconds.
    assert first.estimated_start is not None and first.estimated_start <= (utcnow() + timedelta(seconds=31)).timestamp()


def test_without_a_capacity_every_job_is_admitted_in_fair_order(client, db_url, session_factory, demo):
    beta = make_token(db_url, "beta", "admin")
    r = client.post("/v1/templates", json=_demo(), headers={"Authorization": f"Bearer {beta}"})
    assert r.status_code == 201, r.text
    alpha_jobs = _jobs(client, _alpha(client), 3)
    beta_jobs = _jobs(client, beta, 1)
    with session_factory() as s:
        s.execute(update(Job).values(demand={"core": 3}))
        s.commit()
        plan = Planner(CapacitySettings()).plan(s, "local", utcnow())
    assert plan.preempt == [] and plan.waiting == {}
    assert sorted(map(str, plan.admit)) == sorted(alpha_jobs + beta_jobs)
    # Beta's one job is not last behind alpha's three (fair order, not first come first served).
    assert [str(j) for j in plan.admit].index(beta_jobs[0]) <= 1


def test_a_settings_capacity_applies_until_the_operator_sets_one(client, session_factory, demo):
    jobs = _jobs(client, _alpha(client), 3)
    with session_factory() as s:
        s.execute(update(Job).values(demand={"core": 2}))
        s.commit()
        planner = Planner(CapacitySettings(defaults={"local": {"core": 4}}))
        plan = planner.plan(s, "local", utcnow())
        assert [str(j) for j in plan.admit] == jobs[:2]
        assert "needs 2 cores, 0 free" in plan.waiting[_id(jobs[2])].why
        s.add(BackendCapacity(backend="local", resource="core", amount=6))
        s.commit()
        assert planner.snapshot(s, "local").capacity_source == "api"
        assert len(planner.plan(s, "local", utcnow()).admit) == 3


def _alpha(client) -> str:
    return client.headers["Authorization"].split()[1]


def _id(job_id: str):
    import uuid
    return uuid.UUID(job_id)


def _demo() -> dict:
    return DEMO


def test_a_team_takes_back_its_nominal_quota_once_not_once_a_pass(client, db_url, session_factory):
    """Beta (nominal 1 core) has two jobs waiting while alpha borrows every core: one of alpha's
    jobs is preempted for beta's first; on the next pass, while that job is still stopping, beta's
    second job (which would borrow) preempts nobody."""
    beta = make_token(db_url, "beta", "admin")
    for token in (_alpha(client), beta):
        assert client.post("/v1/templates", json=_demo(), headers={"Authorization": f"Bearer {token}"}).status_code \
            == 201
    alpha_jobs = _jobs(client, _alpha(client), 4)
    beta_jobs = _jobs(client, beta, 2)
    with session_factory() as s:
        s.add(BackendCapacity(backend="local", resource="core", amount=4))
        teams = dict(s.query(Team.name, Team.id).all())
        s.add(TeamShare(team_id=teams["alpha"], backend="local", nominal={"core": 1}))
        s.add(TeamShare(team_id=teams["beta"], backend="local", nominal={"core": 1}))
        s.execute(update(Job).values(demand={"core": 1}))
        _as_running(s, alpha_jobs, {"core": 1})
        s.commit()
    planner = Planner(CapacitySettings())
    with session_factory() as s:
        first = planner.plan(s, "local", utcnow())
    assert [(str(p.for_job), p.kind) for p in first.preempt] == [(beta_jobs[0], "reclaim")]
    # What the controller writes for it (lifecycle.engine.request_preemption), then the next pass.
    victim = first.preempt[0]
    with session_factory() as s:
        s.execute(update(Job).where(Job.id == victim.job_id).values(preempt_requested_at=utcnow(),
                                                                    preempted_for=victim.for_job))
        s.execute(update(Job).where(Job.id == victim.for_job).values(nominated_at=utcnow()))
        s.commit()
        again = planner.plan(s, "local", utcnow())
    assert again.preempt == [] and again.admit == []
    assert "preempted job(s) to stop" in again.waiting[_id(beta_jobs[0])].why


def test_a_backend_at_its_limit_without_a_capacity_plans_without_reading_the_queue(client, session_factory, demo):
    """No launch slot free and no capacity declared: nothing can start and nobody can be
    preempted (nothing is arbitrated), so the controller's plan is empty and reads no waiting
    job. With a capacity declared the plan is made as ever (its preemptions may free a slot)."""
    jobs = _jobs(client, _alpha(client), 3)
    planner = Planner(CapacitySettings())
    with session_factory() as s:
        assert [str(j) for j in planner.plan(s, "local", utcnow()).admit] == jobs     # room not known
        assert [str(j) for j in planner.plan(s, "local", utcnow(), room=2).admit] == jobs
        empty = planner.plan(s, "local", utcnow(), room=0)
        assert empty.admit == [] and empty.preempt == [] and empty.waiting == {}
    with session_factory() as s:
        s.add(BackendCapacity(backend="local", resource="core", amount=2))
        s.execute(update(Job).values(demand={"core": 1}))
        s.commit()
    with session_factory() as s:
        full = planner.plan(s, "local", utcnow(), room=0)
    assert len(full.admit) == 2 and len(full.waiting) == 1    # read and planned: two fit, one waits
