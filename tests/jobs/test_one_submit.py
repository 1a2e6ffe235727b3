"""One way in (issue 24): the API's POST /v1/jobs, a relaunch, the UI's launch form and a
sweep's trial all submit through JobSubmitter, which wakes the controller through
lifecycle.wake for admission only — in-process when this process controls the database,
with no NOTIFY to itself; and a retry attempt's rows are written by the same job-row
writer as a first submit's."""
from __future__ import annotations

import uuid

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select

from service.jobs.submitter import JobSubmitter
from service.lifecycle.engine import Engine
from service.lifecycle.states import JobState
from service.lifecycle.wake import CHANNEL
from service.persistence import jobrows
from service.persistence.models import Job, JobCost, JobEvent, JobLabel
from service.slices import Settings
from tests.apikit import DEMO
from tests.conftest import make_token, truncate_all
from tests.ui.conftest import launch_form, sign_in


def _ui_launch(app, token: str) -> str:
    """Launch the demo template from the UI's form; returns the new job's id."""
    c = TestClient(app)
    sign_in(c, token)
    form = launch_form(c, "mwms-demo", action="launch")
    r = c.post("/ui/templates/mwms-demo/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    return r.headers["location"].split("/ui/jobs/")[1].split("?")[0]


def _every_path(client, tokens) -> dict[str, str]:
    """A job by each way in; returns {path: job id}."""
    out = {}
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    assert r.status_code == 201, r.text
    out["api"] = r.json()["id"]
    r = client.post(f"/v1/jobs/{out['api']}/relaunch", json={})
    assert r.status_code == 201, r.text
    out["relaunch"] = r.json()["id"]
    out["ui"] = _ui_launch(client.app, tokens["member"])
    r = client.post("/v1/sweeps", json={"template": "mwms-demo", "algorithm": "grid", "max_parallel": 1,
                                        "parameters": {"epochs": {"values": [3]}},
                                        "objective": {"metric": "loss", "goal": "minimize"}})
    assert r.status_code == 201, r.text
    client.app.state.services.controller.run_once()       # the sweep launcher starts the trial
    trials = client.get(f"/v1/sweeps/{r.json()['id']}").json()["trials"]
    out["sweep"] = trials[0]["job_id"]
    assert all(out.values())
    return out


def test_every_submit_path_goes_through_the_submitter_and_wakes_for_admission_only(client, demo, tokens,
                                                                                   monkeypatch):
    state = client.app.state.services
    state.controller.run_once()                       # this process now controls the database
    assert state.controller.active
    submitted: list[tuple[str, bool]] = []            # (backend, dry run) per JobSubmitter.submit
    real_submit = JobSubmitter.submit

    def spy(self, session, body, actor, **kw):
        result = real_submit(self, session, body, actor, **kw)
        submitted.append((body.template, kw.get("dry_run", False)))
        return result

    monkeypatch.setattr(JobSubmitter, "submit", spy)
    woken: list[tuple[str | None, bool]] = []
    # The controller's loops are what a wake reaches: record instead of waking them.
    monkeypatch.setattr(state.controller, "wake", lambda target=None, admit_only=False: woken.append(
        (target, admit_only)))
    _every_path(client, tokens)
    # api, relaunch, ui, the sweep's dry-run check of its trial, the trial itself.
    assert submitted == [("mwms-demo", False)] * 3 + [("mwms-demo", True), ("mwms-demo", False)]
    # Each stored job woke the local backend's loop for admission, never for a full pass.
    assert woken.count(("local", True)) == 4
    assert ("local", False) not in woken


def _settings(db_url, tmp_path) -> Settings:
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)


@pytest.mark.postgres
def test_the_controlling_process_sends_itself_no_notify_on_any_path(api_client, pg_database, tmp_path):
    truncate_all(pg_database)
    tokens = {"member": make_token(pg_database, "alpha", "member", name="member-m")}
    plain = pg_database.replace("postgresql+psycopg://", "postgresql://")
    with api_client(_settings(pg_database, tmp_path), make_token(pg_database)) as client, \
            psycopg.connect(plain, autocommit=True) as listener, psycopg.connect(plain, autocommit=True) as other:
        client.app.state.services.controller.run_once()          # this process takes the controller lock
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        listener.execute(f"LISTEN {CHANNEL}")
        _every_path(client, tokens)
        other.execute("SELECT pg_notify(%s, 'marker')", (CHANNEL,))   # committed after every job
        got = []
        for note in listener.notifies(timeout=30, stop_after=20):
            got.append(note.payload)
            if note.payload == "marker":
                break
    # Notifications arrive in commit order: none came from the submits. (The sweep's own
    # creation wakes the sweep launcher of whichever process controls: "sweeps".)
    assert [p for p in got if p != "sweeps"] == ["marker"]


@pytest.mark.postgres
def test_a_process_that_does_not_control_notifies_admission_once_per_path(api_client, pg_database, tmp_path):
    truncate_all(pg_database)
    plain = pg_database.replace("postgresql+psycopg://", "postgresql://")
    with api_client(_settings(pg_database, tmp_path), make_token(pg_database)) as client, \
            psycopg.connect(plain, autocommit=True) as listener:
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        listener.execute(f"LISTEN {CHANNEL}")
        job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
        assert client.post(f"/v1/jobs/{job['id']}/relaunch", json={}).status_code == 201
        got = [n.payload for n in listener.notifies(timeout=30, stop_after=2)]
    assert got == ["local:admit", "local:admit"]


def _per_job_rows(db_url: str, job_id: uuid.UUID) -> dict:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return {
                "labels": sorted(conn.execute(select(JobLabel.key, JobLabel.value)
                                              .where(JobLabel.job_id == job_id)).all()),
                "events": [tuple(r) for r in conn.execute(select(JobEvent.from_state, JobEvent.to_state)
                                                          .where(JobEvent.job_id == job_id)).all()],
                "cost": [tuple(r) for r in conn.execute(
                    select(JobCost.team_id, JobCost.per_hour_micros, JobCost.timeout_seconds, JobCost.complete,
                           JobCost.accelerators, JobCost.currency).where(JobCost.job_id == job_id)).all()],
            }
    finally:
        engine.dispose()


def test_a_retry_attempt_and_a_first_submit_are_written_by_the_one_writer(client, demo, db_url, monkeypatch):
    writes: list[uuid.UUID] = []
    real_insert = jobrows.insert_job

    def spy(session, row, labels, event, cost, **kw):
        writes.append(row["id"])
        return real_insert(session, row, labels, event, cost, **kw)

    monkeypatch.setattr(jobrows, "insert_job", spy)
    overrides = {"retry": {"max_attempts": 2, "exit_codes": [3], "backoff": {"initial_seconds": 0}}}
    r = client.post("/v1/jobs", json={"template": "mwms-demo", "labels": {"team": "vision"}, "overrides": overrides})
    assert r.status_code == 201, r.text
    first = uuid.UUID(r.json()["id"])
    engine: Engine = client.app.state.services.lifecycle
    with client.app.state.services.session_factory() as session:      # the backend reports exit code 3
        engine.move(session, first, JobState.FAILED, reason="exit 3", actor="test",
                    values={"error": {"exit_code": 3, "message": "exit code 3"}})
        session.commit()
        second = session.scalar(select(Job.id).where(Job.retry_of == first))
    assert second is not None and writes == [first, second]
    a, b = _per_job_rows(db_url, first), _per_job_rows(db_url, second)
    assert a["labels"] == b["labels"] == [("team", "vision")]
    assert a["cost"] == b["cost"] and len(a["cost"]) == 1
    assert a["events"][0] == b["events"][0] == (None, "QUEUED") and len(b["events"]) == 1


@pytest.mark.postgres
def test_a_repeat_submit_is_one_statement_on_postgresql_its_wake_included(api_client, pg_database, tmp_path,
                                                                           monkeypatch):
    """The job's rows under the guard of what the pre-check would read, with the NOTIFY in the
    same statement: the wake through lifecycle.wake adds no round trip (the bench's POST
    /v1/jobs path; the first submit read the template's head: tests/jobs/test_guessed_submit.py)."""
    truncate_all(pg_database)
    with api_client(_settings(pg_database, tmp_path), make_token(pg_database)) as client:
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        assert client.post("/v1/jobs", json={"template": "mwms-demo"}).status_code == 201   # caches warm
        sent: list[str] = []
        real_execute = psycopg.Cursor.execute

        def counting(self, query, *args, **kw):
            sent.append(str(query))
            return real_execute(self, query, *args, **kw)

        monkeypatch.setattr(psycopg.Cursor, "execute", counting)
        assert client.post("/v1/jobs", json={"template": "mwms-demo"}).status_code == 201
        monkeypatch.undo()
    assert len(sent) == 1, sent
    assert "pg_notify" in sent[0] and "INSERT INTO jobs" in sent[0] and "EXISTS" in sent[0]
