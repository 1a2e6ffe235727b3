"""A sweep's trials run as its creator's token: revoking that token pauses its sweeps at
once (said on the sweep), and the controller starts a trial only while the token is live.
Trial jobs' Idempotency-Keys are outside what callers may send. SQLite and PostgreSQL."""
from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from service.persistence.models import ApiToken
from service.sweeps.service import job_key
from tests.apikit import assert_problem
from tests.conftest import bearer, make_token
from tests.sweeps.helpers import get, sweep_body, template


@pytest.fixture
def tmpl(client):
    r = client.post("/v1/templates", json=template(workers=["--exit", "0"]))
    assert r.status_code == 201, r.text


def create(client, headers: dict | None = None, **kw) -> dict:
    r = client.post("/v1/sweeps", json=sweep_body(**kw), headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()


def token_id(client, name: str) -> str:
    [t] = [t for t in client.get("/v1/tokens").json() if t["name"] == name]
    return t["id"]


def started(client, sweep_id: str) -> list[dict]:
    return [t for t in get(client, sweep_id)["trials"] if t["job_id"]]


def cancel_trials(client, sweep_id: str) -> None:
    """Room for the next trial (max_parallel 1)."""
    for t in started(client, sweep_id):
        client.post(f"/v1/jobs/{t['job_id']}/cancel")


def test_revoking_the_creator_pauses_its_sweeps_at_once(client, db_url, tmpl):
    alice = bearer(make_token(db_url, "alpha", "member", "alice"))
    bob = bearer(make_token(db_url, "alpha", "member", "bob"))
    hers = create(client, headers=alice, parameters={"acc": {"values": [0.1, 0.2, 0.3]}})
    his = create(client, headers=bob, parameters={"acc": {"values": [0.1, 0.2, 0.3]}})
    controller = client.app.state.controller
    controller.run_once()
    assert len(started(client, hers["id"])) == 1 and len(started(client, his["id"])) == 1

    r = client.post(f"/v1/tokens/{token_id(client, 'alice')}/revoke")
    assert r.status_code == 200, r.text
    paused = get(client, hers["id"])
    assert paused["state"] == "PAUSED" and "alice" in paused["state_reason"] and "revoked" in paused["state_reason"]
    assert get(client, his["id"])["state"] == "RUNNING" and get(client, his["id"])["state_reason"] is None
    assert [s["state"] for s in client.get("/v1/sweeps", params={"state": "PAUSED"}).json()["items"]] == ["PAUSED"]

    # Room frees in both: only bob's sweep starts its next trial.
    cancel_trials(client, hers["id"])
    cancel_trials(client, his["id"])
    controller.run_once()
    assert len(started(client, hers["id"])) == 1 and len(started(client, his["id"])) == 2

    # A member resumes it: its further trials run as them.
    assert client.post(f"/v1/sweeps/{his['id']}/resume").json()["state"] == "RUNNING"   # nothing to do
    r = client.post(f"/v1/sweeps/{hers['id']}/resume", headers=bob)
    assert r.status_code == 200 and r.json()["state"] == "RUNNING" and r.json()["state_reason"] is None, r.text
    controller.run_once()
    trials = started(client, hers["id"])
    assert len(trials) == 2
    job = client.get(f"/v1/jobs/{max(trials, key=lambda t: t['number'])['job_id']}").json()
    assert job["created_by"].startswith("bob")


def test_a_paused_sweep_can_be_cancelled(client, db_url, tmpl):
    alice = bearer(make_token(db_url, "alpha", "member", "alice"))
    sweep = create(client, headers=alice)
    client.app.state.controller.run_once()
    client.post(f"/v1/tokens/{token_id(client, 'alice')}/revoke")
    r = client.post(f"/v1/sweeps/{sweep['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING", r.text
    client.app.state.controller.run_once()
    assert get(client, sweep["id"])["state"] == "CANCELLED"
    assert_problem(client.post(f"/v1/sweeps/{sweep['id']}/resume"), 409)


def test_no_trial_starts_as_a_revoked_token_even_without_the_hook(client, db_url, tmpl):
    alice = bearer(make_token(db_url, "alpha", "member", "alice"))
    sweep = create(client, headers=alice)
    # Revoked behind the service's back (the hook did not run): the controller still checks.
    with client.app.state.session_factory() as session:
        session.execute(update(ApiToken).where(ApiToken.id == uuid.UUID(token_id(client, "alice")))
                        .values(revoked_at=datetime.now(UTC)))
        session.commit()
    client.app.state.controller.run_once()
    now = get(client, sweep["id"])
    assert now["state"] == "PAUSED" and "revoked" in now["state_reason"] and started(client, sweep["id"]) == []


def test_trial_keys_cannot_be_taken_by_a_caller(client, db_url, tmpl):
    mallory = bearer(make_token(db_url, "alpha", "member", "mallory"))
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2]}})
    sid = sweep["id"]
    body = {"template": "sweepable", "parameters": {"acc": 0.9}}
    # The old, guessable form is an ordinary key now; the trial's own form cannot be sent.
    r = client.post("/v1/jobs", json=body, headers={**mallory, "Idempotency-Key": f"trainjobs-sweep-{sid}-trial-1"})
    assert r.status_code == 201, r.text
    theirs = r.json()["id"]
    assert_problem(client.post("/v1/jobs", json=body, headers={**mallory, "Idempotency-Key": job_key(uuid.UUID(sid), 1)}),
                   422)
    client.app.state.controller.run_once()
    [trial] = started(client, sid)
    assert trial["state"] == "QUEUED" and trial["error"] is None and trial["job_id"] != theirs
    assert client.get(f"/v1/jobs/{trial['job_id']}").json()["parameters"] == {"acc": 0.1}
