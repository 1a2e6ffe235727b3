"""A submit guessed from the template's head (jobs.submitter `_guessed`, templates.cache.Head and
guard): once a process has read a template's head for a team without webhooks or budgets, the
next submit of it is one guarded statement on PostgreSQL. What must hold: it is one statement,
and whatever changed behind the process's back since the head was read (another process: a
token revoked, the template updated or archived, a webhook or budgets added) is answered
exactly as the submit in order answers it, with nothing written and nothing notified by the guess."""

import psycopg
import pytest
from sqlalchemy import func, select, text

from service.lifecycle.wake import CHANNEL
from service.persistence.models import Job, JobCost, JobEvent, JobLabel, WebhookDelivery
from service.slices import Settings
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
    first, once, and the same statement under a guard that always holds if it got that far)."""
    parsed = wire.parsed(sent)
    inserts = [i for i, line in enumerate(parsed) if "INSERT INTO jobs" in line]
    assert len(inserts) == 1 + stored and "EXISTS" in parsed[inserts[0]], sent
    if stored:
        assert "SELECT true AS ok" in parsed[inserts[1]] and "EXISTS" not in parsed[inserts[1]]
    heads = [line for line in parsed[inserts[0] + 1:] if "latest_version" in line and "INSERT" not in line]
    assert len(heads) == 1, sent


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


@pytest.fixture
def counted(client, monkeypatch):
    """How often a submit reads the template's head (the pre-check), looks a version up in the
    template cache, and compiles."""
    from service.jobs import precheck
    from service.jobs.compile_reuse import CompileReuse
    from service.templates.cache import TemplateCache
    calls = {"head read": 0, "cache lookup": 0, "compile": 0}

    def counting(name, real):
        def count(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return count

    monkeypatch.setattr(precheck, "for_submit", counting("head read", precheck.for_submit))
    monkeypatch.setattr(TemplateCache, "get", counting("cache lookup", TemplateCache.get))
    monkeypatch.setattr(CompileReuse, "build", counting("compile", CompileReuse.build))
    return calls


@pytest.mark.parametrize("body", [BODY, {**BODY, "parameters": {"epochs": 0}}], ids=["valid", "with-a-problem"])
def test_a_missed_guess_reads_the_head_looks_up_and_compiles_once_each(client, wire, counted, body):
    # Budgets added elsewhere: the guard fails; the version is the same, so the submit in order
    # takes the guess's compile (or its problem) instead of compiling again.
    assert client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 10}).status_code == 200
    wire.sent()
    r = client.post("/v1/jobs", json=body)
    assert r.status_code == (201 if body is BODY else 422), r.text
    assert counted == {"head read": 1, "cache lookup": 1, "compile": 1}
    if body is BODY:
        _guess_then_in_order(wire, wire.sent())
        assert _counts(client) == {"Job": 2, "JobLabel": 2, "JobEvent": 2, "JobCost": 2}


def test_a_guess_missed_for_a_new_version_compiles_that_version(client, wire, counted):
    changed = {**DEMO, "description": "v2"}
    changed.pop("name", None)
    assert client.put("/v1/templates/mwms-demo", json=changed).status_code in (200, 201)
    counted.update({k: 0 for k in counted})
    r = client.post("/v1/jobs", json=BODY)
    assert r.status_code == 201 and r.json()["template"]["version"] == 2, r.text
    # The guess's lookup and compile (version 1), then version 2's: the guess is not reused.
    assert counted == {"head read": 1, "cache lookup": 2, "compile": 2}
