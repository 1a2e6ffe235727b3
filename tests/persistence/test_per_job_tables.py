"""docs/DESIGN.md's recipe "A new per-job table", done as it says: a table (here made in the
test, as its migration would), its one line in persistence.jobrows.PER_JOB, and nothing
else. Then a submit writes its rows (on PostgreSQL in order and guessed: the one builder under
either guard), a retry attempt writes them too, and deleting a job deletes them."""
from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table, Uuid, delete, select

from service.lifecycle.states import JobState
from service.persistence import jobrows
from service.persistence.models import Job, UTCDateTime
from service.persistence.rows import table_of
from service.persistence.session import make_engine

_META = MetaData()
_JOB_ID = table_of(Job).c.id
# One row per job, made from the job's own values.
NOTES = Table("test_job_notes", _META,
              Column("job_id", Uuid, ForeignKey(_JOB_ID, ondelete="CASCADE"), primary_key=True),
              Column("author", String(200), nullable=False),
              Column("at", UTCDateTime, nullable=False),
              Column("weight", Integer, nullable=False, default=7))          # not given: its default
# Any number of rows per job: one per label.
WORDS = Table("test_job_words", _META,
              Column("job_id", Uuid, ForeignKey(_JOB_ID, ondelete="CASCADE"), primary_key=True),
              Column("word", String(64), primary_key=True))

ONE_LINE = {
    "one row": jobrows.PerJob(NOTES, lambda job: ({"job_id": job.row["id"], "author": job.row["created_by"],
                                                   "at": job.row["created_at"]},)),
    "many rows": jobrows.PerJob(WORDS, lambda job: [{"job_id": job.row["id"], "word": f"{k}={v}"}
                                                    for k, v in job.labels.items()], many=True),
}
RETRIED = {"retry": {"max_attempts": 2, "exit_codes": [3], "backoff": {"initial_seconds": 0}}}


@pytest.fixture
def added(request, db_url, monkeypatch):
    """The table made (its migration) and its line in PER_JOB; dropped again afterwards."""
    per_job = ONE_LINE[request.param]
    engine = make_engine(db_url)
    per_job.table.create(engine)
    monkeypatch.setattr(jobrows, "PER_JOB", (*jobrows.PER_JOB, per_job))
    yield per_job.table
    with engine.begin() as conn:
        per_job.table.drop(conn)
    engine.dispose()


def _rows(client, table: Table, job_id: str) -> list[tuple]:
    with client.app.state.services.session_factory() as s:
        return [tuple(r)[1:] for r in s.execute(select(table).where(table.c.job_id == uuid.UUID(job_id))
                                                .order_by(*table.primary_key.columns))]


@pytest.mark.parametrize("added", list(ONE_LINE), indirect=True)
def test_a_table_added_as_the_recipe_says_is_written_with_every_job_and_deleted_with_it(client, demo, added):
    body = {"template": "mwms-demo", "labels": {"team": "vision", "run": "a"}, "overrides": RETRIED}
    first, guessed = (client.post("/v1/jobs", json=body) for _ in range(2))   # PostgreSQL: in order, guessed
    assert first.status_code == guessed.status_code == 201, (first.text, guessed.text)
    for job in (first.json(), guessed.json()):
        if added is NOTES:
            [(author, at, weight)] = _rows(client, added, job["id"])
            made = datetime.fromisoformat(job["created_at"].replace("Z", "+00:00"))
            assert (author, at, weight) == (job["created_by"], made, 7)
        else:
            assert _rows(client, added, job["id"]) == [("run=a",), ("team=vision",)]

    # A retry attempt goes through the same writer: its rows are written too.
    with client.app.state.services.session_factory() as s:
        client.app.state.services.lifecycle.move(s, uuid.UUID(first.json()["id"]), JobState.FAILED, reason="exit 3",
                                                 actor="test", values={"error": {"exit_code": 3, "message": "3"}})
        s.commit()
        attempt = s.scalar(select(Job.id).where(Job.retry_of == uuid.UUID(first.json()["id"])))
    assert attempt is not None
    assert len(_rows(client, added, str(attempt))) == (1 if added is NOTES else 2)

    # Deleting a job deletes its rows (the foreign key's ON DELETE CASCADE, on both databases).
    with client.app.state.services.session_factory() as s:
        s.execute(delete(Job).where(Job.id == uuid.UUID(guessed.json()["id"])))
        s.commit()
    assert _rows(client, added, guessed.json()["id"]) == []
    assert _rows(client, added, first.json()["id"]) != []


@pytest.mark.parametrize("added", ["one row"], indirect=True)
def test_rows_that_name_no_column_of_their_table_are_refused(client, demo, added, monkeypatch):
    wrong = jobrows.PerJob(NOTES, lambda job: ({"job_id": job.row["id"], "author": "a", "at": job.row["created_at"],
                                                "colour": "red"},))
    monkeypatch.setattr(jobrows, "PER_JOB", (*jobrows.PER_JOB[:-1], wrong))
    with pytest.raises(ValueError, match=r"not columns of test_job_notes: \['colour'\]"):
        client.post("/v1/jobs", json={"template": "mwms-demo"})
