"""The lifecycle engine: the state table, compare-and-set writes with one event each,
fencing of a deposed controller, and untrusted values made storable (both databases)."""
import math
import uuid
from types import SimpleNamespace

import pytest
from sqlalchemy import select, update

from service.auth.service import get_or_create_team
from service.core.errors import Conflict
from service.lifecycle.engine import Deposed, Engine, decide
from service.lifecycle.protocol import Observation
from service.lifecycle.states import ALLOWED, TERMINAL, JobState, can_transition
from service.persistence.models import ControllerLease, Job, JobEvent, Template, utcnow
from tests.jobspec.helpers import build, spec

S = JobState


def make_job(session, state=S.QUEUED) -> uuid.UUID:
    team = get_or_create_team(session, "alpha")
    t = Template(team_id=team.id, name=f"t-{uuid.uuid4().hex[:6]}", latest_version=1)
    session.add(t)
    session.flush()
    job = Job(team_id=team.id, display_name="j", template_id=t.id, template_name=t.name, template_version=1,
              backend="local", state=state.value, parameters={}, overrides=None, labels={},
              compiled=build(spec()).to_json())
    session.add(job)
    session.commit()
    return job.id


def events(session, job_id):
    return [(e.from_state, e.to_state, e.actor) for e in
            session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id))]


def row(session, job_id) -> Job:
    session.expire_all()
    return session.get(Job, job_id)


def test_table_is_closed_and_terminal_states_are_final():
    assert set(ALLOWED) == set(JobState)
    for state in TERMINAL:
        assert ALLOWED[state] == frozenset()
    assert can_transition(S.RUNNING, S.SUCCEEDED)
    assert not can_transition(S.SUCCEEDED, S.RUNNING)
    assert not can_transition(S.CANCELLING, S.RUNNING)
    # Vertex can end a job that was being cancelled in any way, PARTIALLY_SUCCEEDED included.
    assert ALLOWED[S.CANCELLING] == TERMINAL


def test_policy_while_cancelling_and_after_the_end():
    assert decide(S.CANCELLING, S.RUNNING) is None       # the cancel has not reached it yet
    assert decide(S.CANCELLING, S.PARTIALLY_SUCCEEDED) == S.PARTIALLY_SUCCEEDED
    assert decide(S.SUCCEEDED, S.FAILED) is None
    assert decide(S.RUNNING, S.RUNNING) is None
    assert decide(S.RUNNING, S.QUEUED) is None            # not an allowed move
    assert decide(S.QUEUED, S.RUNNING) == S.RUNNING


def test_each_change_writes_one_event_and_times(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s)
        assert engine.apply(s, Observation(jid, state=S.PENDING, backend_ref="ref-1"), actor="local")
        assert engine.apply(s, Observation(jid, state=S.RUNNING))
        s.commit()
        job = row(s, jid)
        assert job.started_at is not None and job.ended_at is None and job.backend_ref == "ref-1"
        assert not engine.apply(s, Observation(jid, state=S.RUNNING))  # no change, no event
        assert engine.apply(s, Observation(jid, state=S.SUCCEEDED))
        s.commit()
        assert row(s, jid).ended_at is not None
        assert events(s, jid) == [("QUEUED", "PENDING", "local"), ("PENDING", "RUNNING", "backend"),
                                  ("RUNNING", "SUCCEEDED", "backend")]


def test_move_refuses_what_the_table_forbids(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s, S.SUCCEEDED)
        with pytest.raises(Conflict) as e:
            engine.move(s, jid, S.CANCELLING, reason="cancel", actor="someone")
        assert "SUCCEEDED to CANCELLING" in e.value.detail
        assert row(s, jid).state == "SUCCEEDED" and events(s, jid) == []


def test_a_queued_job_moved_on_waits_no_more(session_factory):
    """A nominated job (capacity being freed for it by preemption) cancelled before it launched
    keeps neither its nomination nor its waiting reason."""
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s)
        s.execute(update(Job).where(Job.id == jid).values(nominated_at=utcnow(), waiting_reason="needs 2 cores"))
        s.commit()
        engine.move(s, jid, S.CANCELLING, reason="cancel requested", actor="someone")
        s.commit()
        job = row(s, jid)
        assert job.state == "CANCELLING" and job.nominated_at is None and job.waiting_reason is None


def test_a_stale_read_never_overwrites_a_newer_state(session_factory):
    """Compare-and-set: the writer decides again from what the row is now."""
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
        # Another writer cancels between our read and our write: simulate it by moving
        # the row under the engine's first read.
        real_write = engine._write
        calls = []

        def racing_write(session, job_id, seen, values, *, fence):
            if not calls:
                calls.append(1)
                session.execute(update(Job).where(Job.id == job_id).values(state=S.CANCELLING.value))
            return real_write(session, job_id, seen, values, fence=fence)
        engine._write = racing_write
        # The backend says RUNNING->PAUSED, but the job is CANCELLING by then: it stays so.
        assert engine.apply(s, Observation(jid, state=S.PAUSED, reason="paused")) is False
        s.commit()
        assert row(s, jid).state == "CANCELLING"
        assert events(s, jid) == []


def test_observations_cannot_revive_a_finished_job(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s)
        engine.move(s, jid, S.CANCELLING, reason="cancel", actor="a")
        engine.apply(s, Observation(jid, state=S.CANCELLED))
        s.commit()
        assert engine.apply(s, Observation(jid, state=S.RUNNING)) is False
        assert engine.apply(s, Observation(jid, state=S.SUCCEEDED)) is False
        s.commit()
        assert row(s, jid).state == "CANCELLED"


def test_observation_moves_state_and_keeps_error(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
        end = utcnow()
        assert engine.apply(s, Observation(jid, state=S.FAILED, reason="replica died",
                                           error={"code": 1, "message": "boom"}, ended_at=end))
        s.commit()
        job = row(s, jid)
        assert job.state == "FAILED" and job.error == {"code": 1, "message": "boom"} and job.ended_at == end
        assert events(s, jid)[-1] == ("RUNNING", "FAILED", "backend")


def test_a_deposed_controller_writes_nothing(session_factory):
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
        s.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(epoch=7))
        s.commit()
        assert engine.apply(s, Observation(jid, progress={"epoch": 1}), fence=7) is False  # our term: written
        s.commit()
        assert row(s, jid).progress == {"epoch": 1}
        s.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(epoch=8))
        s.commit()
        with pytest.raises(Deposed):
            engine.apply(s, Observation(jid, state=S.FAILED, reason="late"), fence=7)
        s.rollback()
        assert row(s, jid).state == "RUNNING" and events(s, jid) == []


def test_untrusted_progress_and_errors_are_stored_clean(session_factory):
    """NaN, Infinity, NUL, lone surrogates, huge values: stored, never a stuck job."""
    engine = Engine(progress_max_bytes=4096)
    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
        progress = {"epoch": 3, "metrics": {"loss": math.nan, "acc": math.inf, "neg": -math.inf, "ok": 0.5},
                    "task": "chief\x00\ud800", "junk": "x" * 100_000, 2**70: [1] * 10}
        error = {"message": "bad \x00 bytes \udcff", "code": 1}
        assert engine.apply(s, Observation(jid, state=S.FAILED, progress=progress, error=error, reason="nan\x00"))
        s.commit()
        job = row(s, jid)
        assert job.state == "FAILED"
        assert job.progress["epoch"] == 3 and job.progress["truncated"] is True
        assert job.progress["metrics"] == {"loss": None, "acc": None, "neg": None, "ok": 0.5}
        assert "\x00" not in job.progress["task"] and "junk" not in job.progress
        assert "\x00" not in job.error["message"] and job.error["code"] == 1
        assert "\x00" not in s.scalar(select(JobEvent.reason).where(JobEvent.job_id == jid))


def test_listeners_see_changes_in_the_same_transaction(session_factory):
    engine = Engine()
    seen = []
    engine.listen(lambda session, change: seen.append((change.from_state, change.to_state, change.progress)))
    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
        engine.apply(s, Observation(jid, progress={"epoch": 1}))
        engine.apply(s, Observation(jid, state=S.SUCCEEDED))
        s.rollback()  # the listener's view is of an uncommitted change: it rolls back with it
        assert seen == [(S.RUNNING, None, {"epoch": 1}), (S.RUNNING, S.SUCCEEDED, None)]
        assert row(s, jid).state == "RUNNING"


class Unstorable(Engine):
    """An engine that cannot store any report with progress (whatever the reason)."""

    def cleaned(self, obs):   # the per-job path's and the batch's (lifecycle/bulk.py) alike
        if obs.progress is not None:
            raise ValueError("cannot store this")
        return super().cleaned(obs)


def test_an_unstorable_report_still_moves_the_job(session_factory):
    """If something in a report cannot be stored anyway, the state change is applied alone."""
    from service.lifecycle.admission import Plan
    from service.lifecycle.loop import BackendLoop, TickStats

    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
    loop = BackendLoop(backend=type("B", (), {"name": "local"})(), session_factory=session_factory,
                       engine=Unstorable(), fence=None, planner=SimpleNamespace(plan=lambda *args, **kw: Plan()))
    with session_factory() as s:
        loop._apply(s, Observation(jid, state=S.SUCCEEDED, progress={"epoch": 1}, reason="done"), TickStats())
        assert row(s, jid).state == "SUCCEEDED"


def test_a_note_is_one_event_without_a_state_change_and_fenced(session_factory):
    """A backend's note (Slurm requeued a RUNNING job under the same id) is recorded in the
    job's history from its state to itself, moves nothing, and is fenced like every write."""
    engine = Engine()
    with session_factory() as s:
        jid = make_job(s, S.RUNNING)
        s.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(epoch=3))
        s.commit()
        assert engine.apply(s, Observation(jid, note="requeued by Slurm (preempted)"), fence=3) is False
        s.commit()
        assert row(s, jid).state == "RUNNING"
        assert events(s, jid) == [("RUNNING", "RUNNING", "backend")]
        assert s.scalars(select(JobEvent.reason).where(JobEvent.job_id == jid)).one() == \
            "requeued by Slurm (preempted)"
        with pytest.raises(Deposed):
            engine.apply(s, Observation(jid, note="late"), fence=2)
        s.rollback()
        engine.apply(s, Observation(jid, state=S.SUCCEEDED))
        s.commit()
        engine.apply(s, Observation(jid, note="after the end"))   # a finished job's history is closed
        s.commit()
        assert [e[1] for e in events(s, jid)] == ["RUNNING", "SUCCEEDED"]
