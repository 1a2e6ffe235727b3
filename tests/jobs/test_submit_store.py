"""What a submit stores, now written in one statement on PostgreSQL (service/jobs/store.py):
the job row with its JSON columns, its label rows, its first event, and the controller's
wake-up — all at commit, none without the others."""
import json
import uuid

import psycopg
import pytest
from sqlalchemy import select, text

from service.jobspec import CompiledJob
from service.lifecycle.wake import ADMIT_SUFFIX
from service.lifecycle.wake import CHANNEL as WAKE_CHANNEL
from service.persistence.models import Job, JobEvent, JobLabel
from service.persistence.session import make_engine, make_session_factory
from service.slices import Settings
from tests.apikit import DEMO, assert_problem
from tests.conftest import make_token, truncate_all


def _rows(db_url: str, job_id: str):
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            jid = uuid.UUID(job_id)
            job = s.get(Job, jid)
            labels = {r.key: r.value for r in s.scalars(select(JobLabel).where(JobLabel.job_id == jid))}
            events = [(e.from_state, e.to_state, e.reason, e.actor)
                      for e in s.scalars(select(JobEvent).where(JobEvent.job_id == jid))]
            raw = s.execute(text("SELECT overrides IS NULL, error IS NULL, progress IS NULL, backend_ref IS NULL "
                                 "FROM jobs WHERE id = :i"),
                            {"i": jid.hex if engine.dialect.name == "sqlite" else jid}).one()
            return job, labels, events, raw
    finally:
        engine.dispose()


def test_the_stored_job_is_what_the_response_shows(client, demo, db_url):
    r = client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 4},
                                      "labels": {"team": "vision", "run": ""}, "display_name": "ünï"})
    assert r.status_code == 201, r.text
    shown = r.json()
    job, labels, events, raw = _rows(db_url, shown["id"])
    assert (job.state, job.display_name, job.parameters, job.labels) == ("QUEUED", "ünï", {"epochs": 4},
                                                                         {"team": "vision", "run": ""})
    assert job.created_at == job.updated_at and job.created_at.tzinfo is not None
    compiled = CompiledJob.from_json(job.compiled)
    assert compiled.custom_job_dict == shown["custom_job"]
    # Each replica's env as its backend (local) gives it: the stored job's launch view.
    from service.jobs.service import cluster_view
    view = client.app.state.services.backends["local"].launch_view(uuid.UUID(shown["id"]), compiled, None)
    assert [r.env for r in cluster_view(compiled, view)] == [rep["env"] for rep in shown["cluster"]]
    assert labels == {"team": "vision", "run": ""}
    assert events == [(None, "QUEUED", "submitted", "admin-user@alpha")]
    # None in a JSON column is stored as JSON null (not SQL NULL), as SQLAlchemy's JSON type writes it.
    assert tuple(raw) == (False, False, False, True)
    # The answer to a submit leaves `queue` out (its place is the queue's to compute: GET says it).
    got = client.get(f"/v1/jobs/{shown['id']}").json()
    assert got.pop("queue") is not None and shown.pop("queue") is None
    assert got == shown
    assert [j["id"] for j in client.get("/v1/jobs", params={"label": "team=vision"}).json()["items"]] == [shown["id"]]


def test_a_new_jobs_values_read_as_its_stored_row(client, demo, db_url, monkeypatch):
    # The answer reads the new job from the values it was stored from, not from a SELECT:
    # each of them, `compiled` (made only when read) included, is what the row holds.
    from service.jobs.submitter import JobSubmitter
    from service.persistence import jobrows
    real, seen = JobSubmitter._store, []

    def keep(self, *args, **kwargs):
        seen.append(real(self, *args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(JobSubmitter, "_store", keep)
    shown = client.post("/v1/jobs", json={"template": "mwms-demo", "labels": {"team": "vision"}}).json()
    job, *_ = _rows(db_url, shown["id"])
    new = seen[0].job
    columns = [c for c in jobrows.COLUMNS if hasattr(new, c)]
    assert "compiled" in columns, columns
    # Only the preemption and observation columns, which a new job has at their defaults.
    assert set(jobrows.COLUMNS) - set(columns) <= {"nominated_at", "preempt_reason", "preempt_kind", "preempt_requested_at",
                                                   "preempted_for", "preemptions", "state_observed_at"}
    for column in columns:
        assert getattr(new, column) == getattr(job, column), column


def test_a_job_without_labels_has_no_label_rows(client, demo, db_url):
    shown = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
    _, labels, events, _ = _rows(db_url, shown["id"])
    assert labels == {} and len(events) == 1


def test_a_refused_submit_stores_nothing(client, demo, db_url):
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 0}}), 422)
    assert client.get("/v1/jobs").json()["items"] == []


@pytest.mark.postgres
def test_the_controller_is_woken_when_the_job_commits(api_client, pg_database, tmp_path):
    truncate_all(pg_database)
    settings = Settings(database_url=pg_database, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)
    with api_client(settings, make_token(pg_database)) as client, \
            psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://"),
                            autocommit=True) as listener:
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        listener.execute(f"LISTEN {WAKE_CHANNEL}")
        job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
        got = next(listener.notifies(timeout=30, stop_after=1))
    assert (got.channel, got.payload) == (WAKE_CHANNEL, "local" + ADMIT_SUFFIX)   # admission is enough
    assert job["state"] == "QUEUED"


def test_the_stored_document_text_is_the_compiled_json():
    from tests.jobspec.helpers import build, spec
    for compiled in (build(spec()), build(spec(workers={"replica_count": 2}, evaluator={},
                                               scheduling={"stall_timeout_seconds": 60}))):
        assert json.loads(compiled.to_json_text()) == compiled.to_json()
        again = CompiledJob.from_json(json.loads(compiled.to_json_text()))
        assert json.loads(again.to_json_text()) == compiled.to_json()


@pytest.mark.postgres
def test_the_controlling_process_wakes_its_own_loop_without_a_notify(api_client, pg_database, tmp_path):
    truncate_all(pg_database)
    settings = Settings(database_url=pg_database, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)
    plain = pg_database.replace("postgresql+psycopg://", "postgresql://")
    with api_client(settings, make_token(pg_database)) as client, \
            psycopg.connect(plain, autocommit=True) as listener, psycopg.connect(plain, autocommit=True) as other:
        client.app.state.services.controller.run_once()          # this process takes the controller lock
        assert client.app.state.services.controller.active
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        listener.execute(f"LISTEN {WAKE_CHANNEL}")
        assert client.post("/v1/jobs", json={"template": "mwms-demo"}).status_code == 201
        other.execute("SELECT pg_notify(%s, 'marker')", (WAKE_CHANNEL,))   # committed after the job
        got = next(listener.notifies(timeout=30, stop_after=1))
    assert got.payload == "marker"    # the submit sent none: notifications arrive in commit order
