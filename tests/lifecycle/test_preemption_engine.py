"""The engine's preemption rule (both databases): a job Slurm preempted takes the requeue path as
one the controller preempted; attempts made for preemptions do not count against the retry
policy's max_attempts; a job that SUCCEEDED before its preemption landed is not preempted."""
from sqlalchemy import update

from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Observation
from service.lifecycle.states import JobState
from service.persistence.models import Job
from tests.lifecycle.test_engine import row
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
