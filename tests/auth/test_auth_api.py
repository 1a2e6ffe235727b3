"""Tokens, roles and teams: who may do what, and teams never see each other."""
import pytest
from sqlalchemy import select

from service.persistence.models import ApiToken
from service.persistence.session import make_engine, make_session_factory
from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer, make_token


@pytest.fixture
def anon(api_client, settings, tokens):
    with api_client(settings) as c:
        yield c


def test_v1_needs_a_token_but_ops_and_docs_do_not(anon):
    body = assert_problem(anon.get("/v1/jobs"), 401)
    assert "Authorization: Bearer" in body["detail"]
    r = anon.get("/v1/templates", headers=bearer("tj_not-a-real-token"))
    assert_problem(r, 401)
    assert r.headers["www-authenticate"].startswith("Bearer")
    for path in ("/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"):
        assert anon.get(path).status_code == 200, path
    # The docs UI's Authorize button: a bearer security scheme on the /v1 routes.
    spec = anon.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


@pytest.mark.parametrize("role,read,submit,manage", [
    ("viewer", 200, 403, 403), ("member", 200, 201, 403), ("admin", 200, 201, 201)])
def test_roles(client, demo, tokens, role, read, submit, manage):
    h = bearer(tokens[role])
    assert client.get("/v1/jobs", headers=h).status_code == read
    assert client.get("/v1/templates/mwms-demo", headers=h).status_code == read
    r = client.post("/v1/jobs", json={"template": "mwms-demo"}, headers=h)
    assert r.status_code == submit
    if submit == 403:
        assert "need a member token" in r.json()["detail"]
    other = {**DEMO, "name": f"by-{role}"}
    assert client.post("/v1/templates", json=other, headers=h).status_code == manage
    assert client.get("/v1/tokens", headers=h).status_code == (200 if role == "admin" else 403)
    assert client.get("/v1/tokens/me", headers=h).json()["role"] == role


def test_member_cancels_and_the_event_names_who(client, demo, tokens):
    h = bearer(tokens["member"])
    job = client.post("/v1/jobs", json={"template": "mwms-demo"}, headers=h).json()
    assert job["created_by"] == "member-user@alpha"
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=bearer(tokens["viewer"])).status_code == 403
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=h).status_code == 202
    client.app.state.controller.run_once()  # it never launched: the controller ends it
    events = client.get(f"/v1/jobs/{job['id']}/events").json()
    assert [(e["to_state"], e["actor"]) for e in events] == [
        ("QUEUED", "member-user@alpha"), ("CANCELLING", "member-user@alpha"), ("CANCELLED", "controller")]


def test_another_teams_objects_are_404_not_403(client, demo, db_url):
    job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
    beta = bearer(make_token(db_url, "beta", "admin"))
    assert_problem(client.get("/v1/templates/mwms-demo", headers=beta), 404)
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=beta), 404)
    assert_problem(client.get(f"/v1/jobs/{job['id']}/events", headers=beta), 404)
    assert_problem(client.post(f"/v1/jobs/{job['id']}/cancel", headers=beta), 404)
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo"}, headers=beta), 404)
    assert client.get("/v1/jobs", headers=beta).json()["items"] == []
    assert client.get("/v1/templates", headers=beta).json()["items"] == []
    assert_problem(client.get("/v1/templates/mwms-demo/versions", headers=beta), 404)
    assert_problem(client.post("/v1/templates/mwms-demo/archive", headers=beta), 404)
    assert_problem(client.put("/v1/templates/mwms-demo", headers=beta,
                              json={k: v for k, v in DEMO.items() if k != "name"}), 404)
    assert_problem(client.get(f"/v1/jobs/{job['id']}/logs", headers=beta), 404)
    # Names are per team: beta may have its own mwms-demo.
    assert client.post("/v1/templates", json=DEMO, headers=beta).status_code == 201
    assert client.get(f"/v1/jobs/{job['id']}").json()["state"] == "QUEUED"


def test_tokens_are_shown_once_stored_hashed_and_revoked_at_once(client, db_url):
    r = client.post("/v1/tokens", json={"name": "ci", "role": "member"})
    assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
    created = r.json()
    secret = created["token"]
    assert secret.startswith("tj_") and len(secret) > 40 and created["team"] == "alpha"
    listed = client.get("/v1/tokens").json()
    assert all("token" not in t for t in listed)
    assert secret not in client.get("/v1/tokens").text
    engine = make_engine(db_url)
    with make_session_factory(engine)() as s:
        row = s.scalar(select(ApiToken).where(ApiToken.name == "ci"))
        assert row.token_hash != secret and secret not in (row.token_hash, row.prefix)
    engine.dispose()

    assert client.get("/v1/jobs", headers=bearer(secret)).status_code == 200
    assert client.post(f"/v1/tokens/{created['id']}/revoke").json()["revoked_at"]
    assert_problem(client.get("/v1/jobs", headers=bearer(secret)), 401)


def test_admins_cannot_touch_other_teams_tokens(client, db_url):
    beta_admin = bearer(make_token(db_url, "beta", "admin"))
    beta_token = client.post("/v1/tokens", json={"name": "x", "role": "viewer"}, headers=beta_admin).json()
    assert_problem(client.post(f"/v1/tokens/{beta_token['id']}/revoke"), 404)
    assert client.get("/v1/jobs", headers=bearer(beta_token["token"])).status_code == 200
