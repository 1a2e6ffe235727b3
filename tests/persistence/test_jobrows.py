"""The job-row writer's one builder (persistence.jobrows): the submit in order and a retry
attempt pass a guard that always holds, a guessed submit the pre-check's facts; the same plan
is one statement on PostgreSQL and an insert per table on SQLite."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import bindparam, false, func, select, true

from service.persistence import jobrows
from service.persistence.models import Job, JobCost, JobEvent, JobLabel
from tests.apikit import DEMO


@pytest.fixture
def new_job(client, db_url):
    """A new job's row and first event, copied from a stored one (a team and template exist)."""
    assert client.post("/v1/templates", json=DEMO).status_code == 201
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    assert r.status_code == 201, r.text
    with client.app.state.services.session_factory() as s:
        row = {c: getattr(s.get(Job, uuid.UUID(r.json()["id"])), c) for c in jobrows.COLUMNS}
    row["id"] = uuid.uuid4()
    row = jobrows.job_row({k: v for k, v in row.items() if k not in ("compiled", "labels")},
                          encoded={"compiled": "{}", "labels": '{"team": "vision"}'})
    event = {"job_id": row["id"], "from_state": None, "to_state": "QUEUED", "reason": "t", "actor": "t",
             "at": row["created_at"]}
    cost = {"job_id": row["id"], "team_id": row["team_id"], "per_hour_micros": 5, "timeout_seconds": 60,
            "complete": True, "accelerators": '{"T4": 2}', "currency": "USD"}
    return row, event, cost


def _count(client, job_id) -> dict:
    with client.app.state.services.session_factory() as s:
        return {m.__name__: s.scalar(select(func.count()).select_from(m).where(m.job_id == job_id))
                for m in (JobLabel, JobEvent, JobCost)} | {"Job": s.scalar(select(func.count()).where(Job.id == job_id))}


def test_a_false_guard_writes_nothing_and_a_true_one_every_row(client, new_job):
    row, event, cost = new_job
    labels = {"team": "vision"}
    with client.app.state.services.session_factory() as s:
        assert jobrows.insert_job(s, row, labels, event, cost, guard=jobrows.Guard(false(), {})) is False
        s.commit()
    assert _count(client, row["id"]) == {"Job": 0, "JobLabel": 0, "JobEvent": 0, "JobCost": 0}
    with client.app.state.services.session_factory() as s:
        assert jobrows.insert_job(s, row, labels, event, cost, guard=jobrows.Guard(true(), {})) is True
        s.commit()
        assert s.get(JobCost, row["id"]).accelerators == {"T4": 2}      # JSON given as text, stored as JSON
        assert s.scalar(select(JobLabel.value).where(JobLabel.job_id == row["id"])) == "vision"
    assert _count(client, row["id"]) == {"Job": 1, "JobLabel": 1, "JobEvent": 1, "JobCost": 1}


def test_a_guard_whose_parameters_are_the_rows_own_is_refused(client, new_job, db_url):
    if db_url.startswith("sqlite"):
        pytest.skip("the names clash only in PostgreSQL's one statement")
    row, event, _ = new_job
    clashing = jobrows.Guard(bindparam("team_id") == row["team_id"], {"team_id": row["team_id"]})
    with client.app.state.services.session_factory() as s, pytest.raises(ValueError, match=r"\['team_id'\]"):
        jobrows.insert_job(s, row, {}, event, None, guard=clashing)


def test_a_value_too_long_is_refused_under_either_guard(client, new_job, db_url):
    """Values are cast to their columns' types, strings to text, so a varchar(n) column still
    refuses a longer value (a cast to varchar(n) would cut it silently). SQLite keeps no lengths."""
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite does not enforce varchar lengths")
    row, event, _ = new_job
    row["created_by"] = "x" * 201             # created_by is varchar(200)
    for guard in (jobrows.ALWAYS, jobrows.Guard(true(), {})):
        with client.app.state.services.session_factory() as s, pytest.raises(Exception, match="too long"):
            jobrows.insert_job(s, row, {}, event, None, guard=guard)
    row["created_by"] = "x" * 200
    with client.app.state.services.session_factory() as s:
        assert jobrows.insert_job(s, row, {}, event, None) is True
        s.commit()
        assert s.get(Job, row["id"]).created_by == "x" * 200
