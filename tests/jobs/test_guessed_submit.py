"""A submit guessed from the template's head (jobs.submitter `_guessed`, templates.cache.Head and
guard): once a process has read a template's head for a team without webhooks or budgets, the
next submit of it is one guarded statement on PostgreSQL. What must hold: it is one statement,
and whatever changed behind the process's back since the head was read (another process: a
token revoked, the template updated or archived, a webhook or budgets added) is answered
exactly as the submit in order answers it, with nothing written and nothing notified by the guess."""
import uuid

import psycopg
import pytest
from sqlalchemy import func, select, text

from service.core.config import Settings
from service.lifecycle.wake import CHANNEL
from service.persistence import jobrows
from service.persistence.models import Job, JobCost, JobEvent, JobLabel, WebhookDelivery
from tests.apikit import DEMO, assert_problem
from tests.conftest import make_token
from tests.jobs.wire import Wire
from tests.webhooks.conftest import LOOPBACK

BODY = {"template": "mwms-demo", "parameters": {"epochs": 2}, "labels": {"team": "vision"}}
# PostgreSQL's alone (SQLite's submit is transactional: no guess).
pytestmark = pytest.mark.parametrize("db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)


@pytest.fixture
def wire(client, demo, db_url):
    # One submit first: the token is then in the auth cache and the template's head is kept.
    assert client.post("/v1/jobs", json={"template": "mwms-demo", "labels": {"warm": "up"}}).status_code == 201
    w = Wire(client.app.state.services.session_factory.kw["bind"])
    yield w
    w.close()


def _counts(client) -> dict:
    with client.app.state.services.session_factory() as s:
        return {m.__name__: s.scalar(select(func.count()).select_from(m)) for m in (Job, JobLabel, JobEvent, JobCost)}


def _elsewhere(client, sql: str, **params) -> None:
    """A change made by another process: straight to the database; nothing this app keeps is told."""
    with client.app.state.services.session_factory() as s:
        s.execute(text(sql), params)
        s.commit()


def _guess_then_in_order(wire: Wire, sent: str, *, stored: bool = True) -> None:
    """The guarded statement ran first and wrote nothing; then the submit in order (pre-check
    first, and the plain insert if it got that far)."""
    parsed = [line for line in sent.splitlines() if "\tParse\t" in line]
    inserts = [i for i, line in enumerate(parsed) if "INSERT INTO jobs" in line]
    assert len(inserts) == 1 + stored and "WITH guard AS" in parsed[inserts[0]], sent
    if stored:
        assert "guard" not in parsed[inserts[1]]
    assert any("latest_version" in line and "INSERT" not in line for line in parsed[inserts[0] + 1:])


def test_a_repeat_submit_is_one_statement_and_stores_every_row(client, wire):
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 201, r.text
    sent = wire.sent()
    assert wire.executes(sent) == 1, sent
    assert "INSERT INTO jobs" in sent and '"BEGIN"' not in sent and '"COMMIT"' not in sent
    assert _counts(client) == {"Job": 2, "JobLabel": 2, "JobEvent": 2, "JobCost": 2}
    job = client.get(f"/v1/jobs/{r.json()['id']}").json()
    assert job["labels"] == {"team": "vision"} and job["state"] == "QUEUED" and job["parameters"] == {"epochs": 2}
    assert job["template"] == {"name": "mwms-demo", "version": 1} and job["cost"] == r.json()["cost"]
    assert wire.returned_in_autocommit == 0


@pytest.mark.parametrize("body", [BODY, {**BODY, "parameters": {"epochs": 0}}], ids=["valid", "with-a-problem"])
def test_a_token_revoked_elsewhere_is_refused_and_nothing_is_written(client, wire, body):
    # Revoked by another process: this one's auth cache still holds the token (the first
    # request after the revocation is the one the guess sees; a 401 then drops it from the
    # cache). A body with a problem gets the 401 too (the guess never answers for itself), not the 422.
    _elsewhere(client, "UPDATE api_tokens SET revoked_at = now()")
    assert_problem(client.post("/v1/jobs", json=body), 401)
    _guess_then_in_order(wire, wire.sent(), stored=False) if body is BODY else None
    assert _counts(client)["Job"] == 1


def test_a_template_updated_elsewhere_launches_its_new_version(client, wire):
    changed = {**DEMO, "description": "v2"}
    changed.pop("name", None)
    assert client.put("/v1/templates/mwms-demo", json=changed).status_code in (200, 201)
    wire.sent()
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 201, r.text
    assert r.json()["template"] == {"name": "mwms-demo", "version": 2}
    _guess_then_in_order(wire, wire.sent())
    assert _counts(client)["Job"] == 2
    # ...and the head read then is the next guess: one statement again.
    assert client.post("/v1/jobs", json=BODY).status_code == 201
    assert wire.executes(wire.sent()) == 1


def test_a_template_archived_elsewhere_is_a_conflict(client, wire):
    _elsewhere(client, "UPDATE templates SET archived_at = now() WHERE name = 'mwms-demo'")
    assert "archived" in assert_problem(client.post("/v1/jobs", json=BODY), 409)["detail"]
    assert _counts(client)["Job"] == 1


def test_budgets_added_since_the_head_was_read_take_the_lock_and_are_enforced(client, wire):
    # Set through the API: nothing tells the head this process keeps, as for another process...
    assert client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 1}).status_code == 200
    wire.sent()
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 409, r.text       # the warm-up's job is QUEUED: the limit holds
    sent = wire.sent()
    _guess_then_in_order(wire, sent, stored=False)
    assert "FOR UPDATE" in sent
    assert _counts(client)["Job"] == 1


def test_a_webhook_added_elsewhere_gets_its_delivery(api_client, db_url, tmp_path, receiver_url="http://127.0.0.1:9/hook"):
    settings = Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False,
                        webhook_allowed_networks=LOOPBACK)
    with api_client(settings, make_token(db_url)) as client:
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        assert client.post("/v1/jobs", json=BODY).status_code == 201          # the head is kept
        hook = client.post("/v1/webhooks", json={"url": receiver_url, "event_types": ["job.state_changed"]})
        assert hook.status_code == 201, hook.text
        job = client.post("/v1/jobs", json=BODY).json()
        with client.app.state.services.session_factory() as s:
            assert s.scalar(select(func.count()).select_from(WebhookDelivery)
                            .where(WebhookDelivery.job_id == job["id"])) == 1


def test_a_guard_that_fails_notifies_nobody(api_client, db_url, tmp_path):
    """A process that does not control sends the controller's wake in the guarded statement:
    only when the guard holds (pg_notify is in the CASE's branch taken)."""
    plain = db_url.replace("postgresql+psycopg://", "postgresql://")
    settings = Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)
    with api_client(settings, make_token(db_url)) as client, \
            psycopg.connect(plain, autocommit=True) as listener, psycopg.connect(plain, autocommit=True) as other:
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        listener.execute(f"LISTEN {CHANNEL}")
        assert client.post("/v1/jobs", json=BODY).status_code == 201           # in order: the head is kept
        assert client.post("/v1/jobs", json=BODY).status_code == 201           # guessed, guard holds
        other.execute("UPDATE templates SET archived_at = now()")
        assert client.post("/v1/jobs", json=BODY).status_code == 409           # guessed, guard fails
        other.execute("SELECT pg_notify(%s, 'marker')", (CHANNEL,))
        got = []
        for note in listener.notifies(timeout=30, stop_after=10):
            got.append(note.payload)
            if note.payload == "marker":
                break
    assert got == ["local:admit", "local:admit", "marker"]


def test_the_guarded_insert_refuses_a_value_too_long_as_the_plain_one_does(client, demo, db_url):
    """Its values are cast to their columns' types: strings to text, so a varchar(n) column
    still refuses a longer value (a cast to varchar(n) would cut it silently)."""
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 201
    with client.app.state.services.session_factory() as s:
        row = {c: getattr(s.get(Job, r.json()["id"]), c) for c in jobrows.COLUMNS}
    row["id"] = uuid.uuid4()
    row = jobrows.job_row({k: v for k, v in row.items() if k != "compiled"}, encoded={"compiled": "{}"})
    row["created_by"] = "x" * 201             # created_by is varchar(200)
    event = {"job_id": row["id"], "from_state": None, "to_state": "QUEUED", "reason": "t", "actor": "t",
             "at": row["created_at"]}
    yes = jobrows.PgGuard("true", {})
    with client.app.state.services.session_factory() as s, pytest.raises(Exception, match="too long"):
        jobrows.insert_job(s, row, {}, event, None, guard=yes)
    row["created_by"] = "x" * 200
    with client.app.state.services.session_factory() as s:
        assert jobrows.insert_job(s, row, {}, event, None, guard=jobrows.PgGuard("false", {})) is False
        assert jobrows.insert_job(s, row, {}, event, None, guard=yes) is True
        s.commit()
        stored = s.get(Job, row["id"])
        assert stored.created_by == "x" * 200 and stored.template_version == 1 and stored.attempt == 1
