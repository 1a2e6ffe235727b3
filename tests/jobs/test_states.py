"""The state machine: transitions are data, one function applies them, one event each."""
import uuid

import pytest
from sqlalchemy import select

from service.auth.service import get_or_create_team
from service.backends.base import Observation
from service.errors import Conflict
from service.jobs.service import apply_observation
from service.jobs.states import ALLOWED, TERMINAL, JobState, can_transition, transition
from service.models import Job, JobEvent, Template, utcnow
from tests.jobspec.helpers import build, spec


def make_job(session, state=JobState.QUEUED) -> Job:
    team = get_or_create_team(session, "alpha")
    t = Template(team_id=team.id, name=f"t-{uuid.uuid4().hex[:6]}", latest_version=1)
    session.add(t)
    session.flush()
    compiled = build(spec())
    job = Job(team_id=team.id, display_name="j", template_id=t.id, template_name=t.name, template_version=1, backend="local",
              state=state.value, parameters={}, overrides=None, labels={}, compiled=compiled.to_json())
    session.add(job)
    session.commit()
    return job


def events(session, job):
    return [(e.from_state, e.to_state, e.actor) for e in
            session.scalars(select(JobEvent).where(JobEvent.job_id == job.id).order_by(JobEvent.id))]


def test_table_is_closed_and_terminal_states_are_final():
    assert set(ALLOWED) == set(JobState)
    for state in TERMINAL:
        assert ALLOWED[state] == frozenset()
    assert can_transition(JobState.RUNNING, JobState.SUCCEEDED)
    assert not can_transition(JobState.SUCCEEDED, JobState.RUNNING)
    assert not can_transition(JobState.CANCELLING, JobState.RUNNING)


def test_each_transition_writes_one_event_and_times(session_factory):
    with session_factory() as s:
        job = make_job(s)
        assert transition(s, job, JobState.PENDING, reason="starting", actor="backend")
        assert transition(s, job, JobState.RUNNING)
        assert job.started_at is not None and job.ended_at is None
        assert not transition(s, job, JobState.RUNNING)  # no change, no event
        assert transition(s, job, JobState.SUCCEEDED)
        assert job.ended_at is not None
        s.commit()
        assert events(s, job) == [("QUEUED", "PENDING", "backend"), ("PENDING", "RUNNING", "system"),
                                  ("RUNNING", "SUCCEEDED", "system")]


def test_illegal_transitions_are_refused(session_factory):
    with session_factory() as s:
        job = make_job(s, JobState.SUCCEEDED)
        with pytest.raises(Conflict) as e:
            transition(s, job, JobState.RUNNING)
        assert "SUCCEEDED to RUNNING" in e.value.detail
        assert job.state == "SUCCEEDED" and events(s, job) == []


def test_observations_cannot_revive_a_finished_job(session_factory):
    with session_factory() as s:
        job = make_job(s)
        transition(s, job, JobState.CANCELLING)
        transition(s, job, JobState.CANCELLED)
        s.commit()
        assert apply_observation(s, Observation(job.id, state=JobState.RUNNING)) is False
        assert apply_observation(s, Observation(job.id, state=JobState.SUCCEEDED)) is False
        s.commit()
        assert s.get(Job, job.id).state == "CANCELLED"


def test_observation_moves_state_and_keeps_error(session_factory):
    with session_factory() as s:
        job = make_job(s, JobState.RUNNING)
        end = utcnow()
        changed = apply_observation(s, Observation(job.id, state=JobState.FAILED, reason="replica died",
                                                   error={"code": 1, "message": "boom"}, ended_at=end))
        s.commit()
        assert changed
        job = s.get(Job, job.id)
        assert job.state == "FAILED" and job.error == {"code": 1, "message": "boom"} and job.ended_at == end
        assert events(s, job)[-1] == ("RUNNING", "FAILED", "backend")
