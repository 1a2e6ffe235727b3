"""Retries in the engine (both databases): the FAILED change and the next attempt commit
together or not at all, a deposed controller makes none, Vertex AI's infrastructure
errors are retried and its other errors are not; and the policy's pure parts."""
import json
import uuid

import pytest
from sqlalchemy import func, select, update

from service.backends.vertex import mapping, view
from service.jobspec import CompiledJob
from service.lifecycle import retries
from service.lifecycle.engine import Deposed, Engine
from service.lifecycle.protocol import Observation
from service.lifecycle.states import JobState
from service.persistence.models import ControllerLease, Job, JobLabel
from tests.jobspec.helpers import build, spec
from tests.lifecycle.test_engine import make_job, row

S = JobState
POLICY = {"max_attempts": 3, "on_signal": True, "on_infrastructure_error": True, "exit_codes": [3],
          "fatal_exit_codes": [137], "backoff": {"initial_seconds": 10, "multiplier": 3, "max_seconds": 60}}


def retrying_job(session, policy=POLICY) -> uuid.UUID:
    jid = make_job(session, S.RUNNING)
    compiled = build(spec(retry=policy)).to_json()
    session.execute(update(Job).where(Job.id == jid).values(compiled=compiled, labels={"team": "vision"}))
    session.add(JobLabel(job_id=jid, key="team", value="vision"))
    session.commit()
    return jid


def attempts(session, first):
    return session.execute(select(Job.id, Job.attempt, Job.state, Job.not_before)
                           .where(Job.retry_of == first).order_by(Job.attempt)).all()


def vertex_failure(code: int, message: str = "boom") -> dict:
    """A failed CustomJob's error as the vertex backend reports it: its normalised facts
    (cause, exit_code) read from Google's code and words, which the lifecycle never parses."""
    return mapping.error_from(code, message)


def test_a_vertex_infrastructure_error_is_retried_in_the_same_transaction(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s)
        assert engine.apply(s, Observation(jid, state=S.FAILED, reason="Vertex AI: FAILED",
                                           error=vertex_failure(14, "The service is unavailable")))
        # Nothing committed yet: roll back, and neither the failure nor the retry exists.
        s.rollback()
        assert row(s, jid).state == "RUNNING" and attempts(s, jid) == []
        engine.apply(s, Observation(jid, state=S.FAILED, reason="Vertex AI: FAILED",
                                    error=vertex_failure(14, "The service is unavailable")))
        s.commit()
        (new,) = attempts(s, jid)
        assert new.attempt == 2 and new.state == "QUEUED"
        failed = row(s, jid)
        assert (new.not_before - failed.ended_at).total_seconds() == pytest.approx(10, abs=1)
        copy = row(s, new.id)
        assert copy.labels == {"team": "vision"} and copy.template_id == failed.template_id
        assert copy.compiled["output_of"] == str(jid)
        assert copy.compiled["custom_job"]["labels"]["trainjobs_job_id"] == str(new.id)
        assert s.scalar(select(func.count()).select_from(JobLabel).where(JobLabel.job_id == new.id)) == 1


def test_the_backoff_grows_and_the_last_attempt_is_final(session_factory):
    engine = Engine()
    with session_factory() as s:
        first = retrying_job(s)
        current = first
        for _ in range(2):
            s.execute(update(Job).where(Job.id == current).values(state=S.RUNNING.value))
            engine.apply(s, Observation(current, state=S.FAILED, error=vertex_failure(13)))
            s.commit()
            current = attempts(s, first)[-1].id
        second, third = attempts(s, first)
        assert round((second.not_before - row(s, first).ended_at).total_seconds()) == 10
        assert round((third.not_before - row(s, second.id).ended_at).total_seconds()) == 30
        s.execute(update(Job).where(Job.id == current).values(state=S.RUNNING.value))
        engine.apply(s, Observation(current, state=S.FAILED, error=vertex_failure(13)))
        s.commit()
        assert [a.attempt for a in attempts(s, first)] == [2, 3]


@pytest.mark.parametrize("error", [vertex_failure(7, "Permission denied"), vertex_failure(3, "bad request"),
                                   {"code": None, "message": "could not start replica"}])
def test_errors_that_are_not_infrastructure_or_signals_are_final(session_factory, error):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s)
        engine.apply(s, Observation(jid, state=S.FAILED, error=error))
        s.commit()
        assert attempts(s, jid) == []


def test_a_job_whose_cancel_was_asked_for_is_not_retried(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s)
        engine.move(s, jid, S.CANCELLING, reason="cancel requested", actor="a")
        engine.apply(s, Observation(jid, state=S.FAILED, error=vertex_failure(14)))
        s.commit()
        assert row(s, jid).state == "FAILED" and attempts(s, jid) == []


def test_a_deposed_controller_makes_no_attempt(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = retrying_job(s)
        s.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(epoch=8))
        s.commit()
        with pytest.raises(Deposed):
            engine.apply(s, Observation(jid, state=S.FAILED, error=vertex_failure(14)), fence=7)
        s.rollback()
        assert row(s, jid).state == "RUNNING" and attempts(s, jid) == []


def test_two_controllers_racing_make_one_attempt(session_factory):
    """Both read RUNNING; the second's compare-and-set finds FAILED and writes nothing."""
    engine = Engine()
    with session_factory() as a, session_factory() as b:
        jid = retrying_job(a)
        assert engine.apply(a, Observation(jid, state=S.FAILED, error=vertex_failure(14)))
        a.commit()
        assert engine.apply(b, Observation(jid, state=S.FAILED, error=vertex_failure(14))) is False
        b.commit()
        assert len(attempts(a, jid)) == 1


@pytest.mark.parametrize("error, retried", [
    ({"exit_code": -9, "signal": "SIGKILL"}, False),                  # 128+9 is fatal in POLICY
    ({"exit_code": -15, "signal": "SIGTERM"}, True),
    ({"exit_code": None, "lost": True}, True),
    ({"exit_code": 3}, True),
    ({"exit_code": 1}, False),
    (vertex_failure(3, "The replica workerpool0-0 exited with a non-zero status of 3."), True),
    (vertex_failure(3, "The replica workerpool0-0 exited with a non-zero status of 137."), False),
    (vertex_failure(3, "The replica workerpool1-0 exited with a non-zero status of 143."), True),
    (vertex_failure(8, "Resources exhausted"), True),
    (vertex_failure(9, "failed precondition"), False),
    (None, False),
])
def test_which_failures_the_policy_retries(error, retried):
    assert retries.classify(POLICY, error)[0] is retried


def test_signals_and_infrastructure_can_be_turned_off():
    off = {**POLICY, "on_signal": False, "on_infrastructure_error": False}
    assert retries.classify(off, {"exit_code": -15, "signal": "SIGTERM"})[0] is False
    assert retries.classify(off, vertex_failure(14))[0] is False


def test_the_service_limits_cap_the_backoff():
    limits = retries.RetryLimits(max_attempts=5, max_backoff_seconds=20)
    assert [retries.backoff_seconds(POLICY, n, limits) for n in (1, 2, 3)] == [10, 20, 20]
    assert retries.limit_problems({**POLICY, "max_attempts": 6}, limits)[0].field == "spec.retry.max_attempts"


def test_on_vertex_a_retry_writes_where_its_first_attempt_did():
    first, second = uuid.uuid4(), uuid.uuid4()
    compiled = CompiledJob.from_json({**build(spec()).to_json(), "output_of": str(first)})
    effective = view.effective(compiled, second, base_output_directory="gs://b/runs", service_account=None)
    assert effective.base_output_directory == f"gs://b/runs/{first}"
    env = view.launch_view(effective).env["workerpool0-0"]
    assert env["AIP_CHECKPOINT_DIR"] == f"gs://b/runs/{first}/checkpoints/"
    assert json.loads(effective.custom_job_json)["labels"]["trainjobs_job_id"] == str(second)
    # The CompiledJob keeps what the lifecycle reads through a JSON round trip.
    again = CompiledJob.from_json(json.loads(compiled.to_json_text()))
    assert again.output_of == str(first) and again == CompiledJob.from_json(compiled.to_json())
