"""Issue 47.4 and 49.4: what of the waiting jobs the planner reads. Each team's oldest
TRAINJOBS_SCHEDULER_MAX_WAITING (one team's backlog used to fill the window and hide every other
team's jobs: QUEUED with a slot free and its team using nothing, missing from GET /v1/queue);
none of a team the admission gate holds; and a preempted job's next attempt by its first
attempt's age (it was admitted once: it keeps its place)."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from service.capacity.planner import Planner
from service.capacity.settings import CapacitySettings
from service.core.clock import utcnow
from service.persistence.models import Job, Team
from tests.capacity.test_planner import _alpha, _demo, _id, _jobs
from tests.conftest import make_token


def _two_teams(client, db_url) -> str:
    beta = make_token(db_url, "beta", "admin")
    r = client.post("/v1/templates", json=_demo(), headers={"Authorization": f"Bearer {beta}"})
    assert r.status_code == 201, r.text
    return beta


def test_one_teams_backlog_does_not_hide_another_teams_job(client, db_url, session_factory, demo):
    beta = _two_teams(client, db_url)
    alpha_jobs = _jobs(client, _alpha(client), 5)
    beta_jobs = _jobs(client, beta, 1)
    planner = Planner(CapacitySettings(max_waiting=3))
    with session_factory() as s:
        snap = planner.snapshot(s, "local", slots=1)
        plan = planner.plan(s, "local", utcnow(), slots=1)
    assert sorted(str(w.job_id) for w in snap.waiting) == sorted(alpha_jobs[:3] + beta_jobs)
    # Nobody runs and nobody was served: the oldest waiting job goes first; beta's is next.
    assert [str(j) for j in plan.admit] == alpha_jobs[:1]
    assert plan.waiting[_id(beta_jobs[0])].position == 1


def test_a_team_the_gate_holds_is_left_out_of_the_plan(client, db_url, session_factory, demo):
    beta = _two_teams(client, db_url)
    _jobs(client, _alpha(client), 3)
    beta_jobs = _jobs(client, beta, 1)
    with session_factory() as s:
        alpha = s.query(Team.id).filter(Team.name == "alpha").scalar()
        plan = Planner(CapacitySettings()).plan(s, "local", utcnow(), slots=1, held_teams=frozenset({alpha}))
    assert [str(j) for j in plan.admit] == beta_jobs and plan.waiting == {}


def test_a_preempted_jobs_next_attempt_keeps_its_first_attempts_place(client, db_url, session_factory, demo):
    beta = _two_teams(client, db_url)
    first, attempt = _jobs(client, _alpha(client), 2)
    beta_jobs = _jobs(client, beta, 1)
    with session_factory() as s:
        now = utcnow()
        s.execute(update(Job).where(Job.id == _id(first)).values(state="FAILED", created_at=now - timedelta(hours=1)))
        s.execute(update(Job).where(Job.id == _id(beta_jobs[0])).values(created_at=now - timedelta(minutes=30)))
        # The preemption's new attempt, made just now (retries.plan_preemption).
        s.execute(update(Job).where(Job.id == _id(attempt)).values(retry_of=_id(first), attempt=2, preemptions=1,
                                                                  created_at=now))
        s.commit()
        planner = Planner(CapacitySettings())
        snap = planner.snapshot(s, "local", slots=1)
        plan = planner.plan(s, "local", utcnow(), slots=1)
    ages = {str(w.job_id): w.queued_at for w in snap.waiting}
    assert ages[attempt] == (now - timedelta(hours=1)).timestamp()
    assert [str(j) for j in plan.admit] == [attempt]        # older than beta's, which waited 30 minutes
