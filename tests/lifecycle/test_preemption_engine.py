"""The engine's preemption rule (both databases): a job Slurm preempted takes the requeue path as
one the controller preempted; attempts made for preemptions do not count against the retry
policy's max_attempts; a job that SUCCEEDED before its preemption landed is not preempted."""
from sqlalchemy import update

from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Observation
from service.lifecycle.states import JobState
from service.persistence.models import Job
from tests.lifecycle.test_engine import make_job, row
from tests.lifecycle.test_retries import POLICY, attempts, retrying_job

S = JobState


def test_slurm_preemption_is_requeued_whatever_the_policy(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s, dict(POLICY, max_attempts=1))        # the policy retries nothing
        engine.apply(s, Observation(jid, state=S.FAILED, reason="slurm: PREEMPTED", error={
            "cause": "preemption", "preempted_by": "slurm", "message": "job requeued by QoS preemption"}))
        s.commit()
        failed = row(s, jid)
        assert failed.error["cause"] == "preemption" and failed.error["kind"] == "slurm"
        assert failed.error["preempted_by"] == "slurm" and failed.error["message"].startswith("preempted by its backend's own scheduler (slurm)")
        (new,) = attempts(s, jid)
        assert new.attempt == 2 and new.state == "QUEUED" and new.not_before is None
        assert row(s, new.id).preemptions == 1


def test_preemption_attempts_do_not_count_against_max_attempts(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s, dict(POLICY, max_attempts=2))
        s.execute(update(Job).where(Job.id == jid).values(attempt=3, preemptions=2))  # two preemptions so far
        s.commit()
        engine.apply(s, Observation(jid, state=S.FAILED, reason="exit 3", error={"exit_code": 3}))
        s.commit()
        (new,) = attempts(s, jid)
        assert new.attempt == 4      # its first own failure: attempt 2 of 2 by the policy
        assert "(attempt 2 of 2)" in engine_reason(s, jid)


def test_a_job_that_succeeded_before_the_stop_is_not_preempted(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s)
        s.execute(update(Job).where(Job.id == jid).values(preempt_requested_at=row(s, jid).created_at,
                                                          preempt_reason="reclaim: team beta is below its quota"))
        s.commit()
        engine.apply(s, Observation(jid, state=S.SUCCEEDED, reason="every replica exited 0"))
        s.commit()
        assert row(s, jid).state == "SUCCEEDED" and row(s, jid).error is None and attempts(s, jid) == []


def engine_reason(s, jid) -> str:
    from sqlalchemy import select

    from service.persistence.models import JobEvent
    return s.execute(select(JobEvent.reason).where(JobEvent.job_id == jid).order_by(JobEvent.id.desc())).scalars().first()


def _job_of(s, team: str, state=S.RUNNING):
    from service.auth.service import get_or_create_team
    jid = make_job(s, state)
    s.execute(update(Job).where(Job.id == jid).values(team_id=get_or_create_team(s, team).id, backend_ref="r"))
    s.commit()
    return jid


def test_a_preemption_names_the_waiting_job_to_its_own_team_only(session_factory):
    """A member reads which job of their team theirs was preempted for; another team's job is
    "another team's job" in the event, the error and the job view's list (its id is not theirs)."""
    from service.jobs.preemption_history import preemptions_of
    from service.jobs.service import attempts_of
    from service.lifecycle.admission import PreemptOrder

    engine = Engine()
    with session_factory() as s:
        victim, own_waiting = _job_of(s, "alpha"), _job_of(s, "alpha", S.QUEUED)
        other_victim, beta_waiting = _job_of(s, "alpha"), _job_of(s, "beta", S.QUEUED)
        for v, w, why in ((victim, own_waiting, "priority: a job of priority 5 (team alpha) needs it"),
                          (other_victim, beta_waiting, "reclaim: team beta reclaims its nominal quota")):
            kind, text = why.split(": ", 1)
            assert engine.request_preemption(s, PreemptOrder(v, w, kind, text), fence=None)
            s.commit()
            engine.apply(s, Observation(v, state=S.FAILED, reason="stopped", error={"message": "SIGTERM"}))
            s.commit()
        team = row(s, victim).team_id
        own, other = row(s, victim), row(s, other_victim)
        assert own.error["for_job"] == str(own_waiting) and own.error["message"].startswith(f"preempted for job {own_waiting}")
        assert other.error["for_job"] is None and str(beta_waiting) not in str(other.error)
        assert other.error["message"].startswith("preempted for another team's job (team beta reclaims")
        assert f"preemption requested for job {own_waiting}: " in _reasons(s, victim)
        assert "preemption requested for another team's job: team beta" in _reasons(s, other_victim)
        assert str(beta_waiting) not in _reasons(s, other_victim)
        # The row keeps the id for the controller (the waiting job's nomination).
        assert other.preempted_for == beta_waiting
        (seen_own,) = preemptions_of(s, team, attempts_of(s, own))
        (seen_other,) = preemptions_of(s, team, attempts_of(s, other))
        assert seen_own.for_job == own_waiting and seen_other.for_job is None and seen_other.kind == "reclaim"


def _reasons(s, jid) -> str:
    from sqlalchemy import select

    from service.persistence.models import JobEvent
    return " | ".join(s.execute(select(JobEvent.reason).where(JobEvent.job_id == jid)).scalars())
