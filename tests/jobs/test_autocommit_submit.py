"""A submit for a team without limits or webhooks, on PostgreSQL, runs its pre-check and its
one insert statement as statements that commit themselves (service/persistence/autocommit.py):
no BEGIN, no COMMIT. What must hold: the rows are all there, a failing statement leaves none
of them, the Idempotency-Key replay still works, a limited team's submit keeps its
transaction (the lock), and no connection goes back to the pool in autocommit mode."""
import uuid

import pytest
from sqlalchemy import func, select, text

from service.jobs.submitter import JobSubmitter
from service.persistence.models import Job, JobCost, JobEvent, JobLabel
from tests.apikit import assert_problem
from tests.jobs.wire import Wire

BODY = {"template": "mwms-demo", "parameters": {"epochs": 2}, "labels": {"team": "vision"}}


@pytest.fixture
def wire(client, demo, db_url):
    if not db_url.startswith("postgresql"):
        pytest.skip("autocommit is PostgreSQL's (SQLite's submit is transactional)")
    # One submit first: the token is then in the auth cache (the first request reads it in a
    # transaction of its own), as it is for every later submit with it.
    assert client.post("/v1/jobs", json={"template": "mwms-demo", "labels": {"warm": "up"}}).status_code == 201
    w = Wire(client.app.state.services.session_factory.kw["bind"])
    yield w
    w.close()


def _counts(client, job_id: str | None = None) -> dict:
    with client.app.state.services.session_factory() as s:
        return {m.__name__: s.scalar(select(func.count()).select_from(m)) for m in (Job, JobLabel, JobEvent, JobCost)}


def _transaction_commands(sent: str) -> list[str]:
    return [w for w in ("BEGIN", "COMMIT", "ROLLBACK") if f'"{w}"' in sent]


def test_a_plain_submit_sends_no_begin_or_commit_and_stores_every_row(client, wire):
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 201, r.text
    sent = wire.sent()
    assert "INSERT INTO jobs" in sent and _transaction_commands(sent) == [], sent
    assert _counts(client) == {"Job": 2, "JobLabel": 2, "JobEvent": 2, "JobCost": 2}
    assert client.get(f"/v1/jobs/{r.json()['id']}").json()["labels"] == {"team": "vision"}
    assert wire.returned_in_autocommit == 0


def test_a_limited_team_keeps_its_transaction_and_lock(client, wire):
    assert client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 5}).status_code == 200
    wire.sent()
    assert client.post("/v1/jobs", json=BODY).status_code == 201
    sent = wire.sent()
    assert _transaction_commands(sent) == ["BEGIN", "COMMIT"] and "FOR UPDATE" in sent
    # The lock comes after BEGIN: the pre-check before it ran alone. (The insert guessed from the
    # warm-up's head came first and wrote nothing: its guard found the limits, test_guessed_submit.py.)
    assert sent.index("INSERT INTO jobs") < sent.index('"BEGIN"') < sent.index("FOR UPDATE") \
        < sent.rindex("INSERT INTO jobs") < sent.index('"COMMIT"')
    assert _counts(client)["Job"] == 2
    assert wire.returned_in_autocommit == 0


def test_a_failing_insert_leaves_nothing_and_the_connection_usable(client, wire, db_url):
    # The cost row, the statement's last part, fails: the job, label and event rows before it go too.
    with client.app.state.services.session_factory() as s:
        s.execute(text("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                       "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"))
        s.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON job_costs FOR EACH ROW EXECUTE FUNCTION refuse()"))
        s.commit()
    try:
        r = client.post("/v1/jobs", json=BODY)
        assert r.status_code >= 500
        assert _counts(client) == {"Job": 1, "JobLabel": 1, "JobEvent": 1, "JobCost": 1}   # the warm-up's
    finally:
        with client.app.state.services.session_factory() as s:
            s.execute(text("DROP TRIGGER refuse ON job_costs"))
            s.execute(text("DROP FUNCTION refuse()"))
            s.commit()
    assert wire.returned_in_autocommit == 0
    assert client.post("/v1/jobs", json=BODY).status_code == 201
    assert _counts(client)["Job"] == 2


def test_a_refused_submit_leaves_the_connection_transactional(client, wire):
    assert_problem(client.post("/v1/jobs", json={**BODY, "parameters": {"epochs": 0}}), 422)
    assert_problem(client.post("/v1/jobs", json={**BODY, "template": "nope"}), 404)
    assert wire.returned_in_autocommit == 0


def test_a_key_stored_by_a_racing_request_is_replayed(client, demo, db_url, monkeypatch):
    # The race of tests/jobs/test_idempotency.py made certain: the first look for the key finds
    # nothing, then the insert meets the other request's row (IntegrityError) and replays it.
    # On SQLite (transactional) and PostgreSQL (the insert alone) alike.
    key = f"race-{uuid.uuid4().hex}"
    first = client.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": key})
    assert first.status_code == 201
    real, missed = JobSubmitter._replay, []

    def miss_once(session, actor, k, digest):
        if not missed:
            missed.append(k)
            return None
        return real(session, actor, k, digest)

    monkeypatch.setattr(JobSubmitter, "_replay", staticmethod(miss_once))
    again = client.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": key})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true" and missed == [key]
    assert again.json()["id"] == first.json()["id"]
    assert _counts(client)["Job"] == 1
    # And the connection is still good for the next one.
    assert client.post("/v1/jobs", json=BODY).status_code == 201
