"""Issue 51.2: a controller pass writes its launches and what it polled in a few transactions,
not one (or two) per job (service/lifecycle/applying.py, loop.py `_launch_rows`), without losing
what the one-job-at-a-time writes guaranteed: every job moves exactly once through each state,
a batch that cannot be written together is written one job at a time, and a pass stopped by a
failed submit leaves no job marked as launched that was not submitted. SQLite and PostgreSQL."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event, select, update

from service.lifecycle import applying, bulk
from service.lifecycle.engine import Deposed, Engine
from service.lifecycle.protocol import Observation, TransientBackendError
from service.lifecycle.states import JobState
from service.persistence.models import ControllerLease, Job
from tests.backends.localkit import Api
from tests.backends.sim.simkit import settings, states, submit, template
from tests.conftest import make_token
from tests.lifecycle.test_engine import Unstorable, events, make_job, row
from tests.waiting import wait_for

S = JobState
JOBS = 12


@pytest.fixture
def sim(api_client, db_url):
    """The sim with no capacity arbitrated, its jobs 1 s timers; no controller thread."""
    client = api_client(settings(db_url, run_reconciler=False), make_token(db_url, "alpha", "admin"))
    api = Api(client)
    template(api, "short", {"sim-duration-seconds": "1"})
    controller = client.app.state.services.controller
    controller.run_once()                     # this process takes the controller lock
    return api, controller.loops["sim"]


def _commits(api: Api) -> list[int]:
    """A counter of the commits on the service's database engine (every session's)."""
    count = [0]
    bind = api.c.app.state.services.session_factory.kw["bind"]
    event.listen(bind, "commit", lambda conn: count.__setitem__(0, count[0] + 1))
    return count


def _statements(api: Api) -> list[int]:
    """A counter of the statements sent to the database (each a round trip on PostgreSQL)."""
    count = [0]
    bind = api.c.app.state.services.session_factory.kw["bind"]
    event.listen(bind, "before_cursor_execute", lambda *a: count.__setitem__(0, count[0] + 1))
    return count


def test_a_pass_sends_its_jobs_writes_in_a_few_statements(sim):
    """Not a round trip (or three) a job: a pass's launches (the gate, the attempts, the specs the
    submits read, what the backend answered) and each later pass's news of the same jobs cost a
    number of statements that does not grow with the jobs (lifecycle/bulk.py; issue 51.2)."""
    api, loop = sim
    jobs = [submit(api, "short")["id"] for _ in range(JOBS)]
    statements = _statements(api)
    assert loop.run_once().submitted == JOBS
    assert statements[0] <= 30, statements     # 99 before, 8 a job (24 with bulk.py)

    def all_ended() -> bool:
        before = statements[0]
        loop.run_once()
        assert statements[0] - before <= 20   # 19 with news of all 12 (3 or more a job before), 7 without
        return all(api.job(j)["state"] == "SUCCEEDED" for j in jobs)
    wait_for(all_ended, "every sim job to end", timeout=60)
    for j in jobs:
        assert states(api, j) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]


def test_a_pass_writes_its_launches_and_its_ends_in_a_few_transactions(sim):
    api, loop = sim
    jobs = [submit(api, "short")["id"] for _ in range(JOBS)]
    commits = _commits(api)
    stats = loop.run_once()
    assert stats.submitted == JOBS
    assert commits[0] <= 3, commits        # the attempts, the launches (and the observed stamps)

    def all_ended() -> bool:
        before = commits[0]
        loop.run_once()
        assert commits[0] - before <= 3    # whatever the pass saw, a handful of commits
        return all(api.job(j)["state"] == "SUCCEEDED" for j in jobs)
    wait_for(all_ended, "every sim job to end", timeout=60)
    for j in jobs:
        assert states(api, j) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]   # each change once


def test_a_failed_submit_forgets_the_attempts_of_the_jobs_it_did_not_submit(sim, monkeypatch):
    api, loop = sim
    jobs = [submit(api, "short")["id"] for _ in range(5)]
    real, calls = loop.backend.submit, []

    def flaky(handle):
        calls.append(handle.id)
        if len(calls) == 2:
            raise TransientBackendError("busy", nothing_launched=True)
        return real(handle)
    monkeypatch.setattr(loop.backend, "submit", flaky)
    loop.run_once()
    with api.c.app.state.services.session_factory() as s:
        rows = {str(r.id): r for r in s.execute(select(Job.id, Job.state, Job.backend_ref, Job.launch_attempted_at)
                                                .where(Job.id.in_([uuid.UUID(j) for j in jobs])))}
    launched = [j for j in jobs if rows[j].backend_ref is not None]
    assert len(launched) == 1 and len(calls) == 2
    # The refused job and those after it: no attempt recorded (nothing launched), all waiting.
    assert all(rows[j].launch_attempted_at is None and rows[j].state == "QUEUED" for j in jobs if j not in launched)
    loop.run_once()
    assert all(api.job(j)["backend_ref"] for j in jobs)
    assert sorted(map(str, calls)) == sorted(jobs + [str(calls[1])])   # each submitted once, the refused one twice


def test_a_batch_that_cannot_be_written_together_is_written_one_job_at_a_time(session_factory):
    """If one report cannot be stored, the others' states are still written, and its state alone."""
    with session_factory() as s:
        ids = [make_job(s, S.RUNNING) for _ in range(3)]
    with session_factory() as s:
        done = applying.apply_all(Unstorable(), s, [Observation(ids[0], state=S.SUCCEEDED, reason="done"),
                                                Observation(ids[1], state=S.SUCCEEDED, progress={"epoch": 1}),
                                                Observation(ids[2], state=S.FAILED, reason="exit 1")],
                                  fence=None, actor="local")
        assert (done.changed, done.errors) == (3, 1)
        assert [row(s, j).state for j in ids] == ["SUCCEEDED", "SUCCEEDED", "FAILED"]


class Meddling(Engine):
    """Another writer cancels `victim` after the batch has read it, before the batch writes."""

    def __init__(self, session_factory, victim) -> None:
        super().__init__()
        self.session_factory, self.victim, self.done = session_factory, victim, False

    def planned(self, session, obs, row, progress, error, now):
        if obs.job_id == self.victim and not self.done:
            self.done = True
            with self.session_factory() as other:
                Engine().move(other, self.victim, S.CANCELLING, reason="cancelled meanwhile", actor="member")
                other.commit()
        return super().planned(session, obs, row, progress, error, now)


def test_a_job_changed_since_the_batch_read_it_is_not_overwritten(session_factory):
    """The batch's UPDATE checks each row's state as it was read: the job cancelled meanwhile is
    decided again from CANCELLING (its end recorded from there), never moved from RUNNING."""
    with session_factory() as s:
        ids = [make_job(s, S.RUNNING) for _ in range(3)]
    with session_factory() as s:
        done = applying.apply_all(Meddling(session_factory, ids[1]), s,
                                  [Observation(j, state=S.SUCCEEDED, reason="done") for j in ids], fence=None,
                                  actor="sim")
        assert (done.changed, done.errors) == (3, 0)
        assert [row(s, j).state for j in ids] == ["SUCCEEDED"] * 3
        assert events(s, ids[1]) == [("RUNNING", "CANCELLING", "member"), ("CANCELLING", "SUCCEEDED", "sim")]
        assert [events(s, j) for j in (ids[0], ids[2])] == [[("RUNNING", "SUCCEEDED", "sim")]] * 2


def test_a_deposed_controllers_batch_writes_nothing(session_factory):
    """Fenced as one job's write: once another controller holds the lease, neither a batch of
    observations nor a batch of launch attempts changes a row."""
    with session_factory() as s:
        running = [make_job(s, S.RUNNING) for _ in range(3)]
        queued = [make_job(s, S.QUEUED) for _ in range(3)]
        s.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(epoch=8))
        s.commit()
        with pytest.raises(Deposed):
            applying.apply_all(Engine(), s, [Observation(j, state=S.SUCCEEDED) for j in running], fence=7, actor="sim")
        with pytest.raises(Deposed):
            bulk.mark_attempts(Engine(), s, queued, fence=7)
        s.rollback()
        assert [row(s, j).state for j in running] == ["RUNNING"] * 3
        assert all(events(s, j) == [] for j in running)
        assert all(row(s, j).launch_attempted_at is None for j in queued)
        assert bulk.mark_attempts(Engine(), s, queued, fence=8) == set(queued)   # the holder's term: written


def test_a_job_reported_twice_in_one_batch_moves_through_both_in_a_few_statements(session_factory):
    """The sim's poll reports RUNNING and the end of a job that ran between two passes: each
    report is applied in its order, and the batch stays a few statements (one round per report
    of a job), not the per-job path's three or more a report."""
    with session_factory() as s:
        ids = [make_job(s, S.PENDING) for _ in range(10)]
    with session_factory() as s:
        count = [0]
        event.listen(s.get_bind(), "before_cursor_execute", lambda *a: count.__setitem__(0, count[0] + 1))
        reports = [Observation(j, state=st, reason=st.value.lower()) for j in ids for st in (S.RUNNING, S.SUCCEEDED)]
        done = applying.apply_all(Engine(), s, reports, fence=None, actor="sim")
        assert (done.changed, done.errors) == (20, 0)
        assert count[0] <= 10, count          # 33 when the second reports went one at a time
        for j in ids:
            assert events(s, j) == [("PENDING", "RUNNING", "sim"), ("RUNNING", "SUCCEEDED", "sim")]
            assert row(s, j).started_at is not None and row(s, j).ended_at is not None
