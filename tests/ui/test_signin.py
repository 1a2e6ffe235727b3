"""UI sign-in: token -> signed session cookie (HttpOnly, SameSite=Strict), CSRF on
every form, sign-out, revoked tokens, the signing key, and where `next` may lead."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from service.persistence.models import ServiceSecret
from service.ui import sessions
from tests.conftest import ONE_DATABASE
from tests.ui.conftest import csrf_of, new_client, sign_in

pytestmark = ONE_DATABASE


def test_pages_need_a_session_and_send_browsers_to_sign_in(client):
    r = client.get("/ui/jobs?state=RUNNING", headers={"Accept": "text/html"}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/login?next=%2Fui%2Fjobs%3Fstate%3DRUNNING"
    # Scripts (fetch, EventSource) get a 401, not a sign-in page to parse.
    assert client.get("/ui/jobs/00000000-0000-0000-0000-000000000000/panels").status_code == 401
    assert client.get("/ui/stream").status_code == 401


def test_sign_in_sets_a_signed_httponly_strict_cookie_that_holds_no_token(client, tokens, ui_settings):
    page = client.get("/ui/login")
    assert "Content-Security-Policy" in page.headers and page.headers["X-Frame-Options"] == "DENY"
    r = client.post("/ui/login", data={"csrf": csrf_of(page.text), "token": tokens["member"], "next": "/ui/templates"},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/templates"
    cookie = next(c for c in r.headers.get_list("set-cookie") if c.startswith(sessions.SESSION_COOKIE + "="))
    flags = {f.strip().split("=")[0].lower() for f in cookie.split(";")[1:]}
    assert {"httponly", "samesite", "path", "max-age"} <= flags
    assert "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert f"Max-Age={ui_settings.ui_session_max_age_seconds}" in cookie
    assert tokens["member"] not in cookie and tokens["member"][3:] not in cookie
    page = client.get("/ui/jobs")
    assert page.status_code == 200 and "member-alice@alpha" in page.text


def test_cookies_are_secure_when_the_setting_says_so(api_client, db_url, work_dir, tokens):
    from tests.backends.localkit import settings_for
    with api_client(settings_for(db_url, work_dir, ui_secure_cookies=True, run_reconciler=False),
                    base_url="https://testserver") as c:
        page = c.get("/ui/login")
        assert "Secure" in page.headers["set-cookie"]
        r = c.post("/ui/login", data={"csrf": csrf_of(page.text), "token": tokens["viewer"]}, follow_redirects=False)
        assert r.status_code == 303
        session = next(x for x in r.headers.get_list("set-cookie") if x.startswith(sessions.SESSION_COOKIE + "="))
        assert "Secure" in session


def test_a_wrong_token_or_a_forged_form_signs_nobody_in(client, tokens):
    page = client.get("/ui/login")
    r = client.post("/ui/login", data={"csrf": csrf_of(page.text), "token": "tj_not-a-token"})
    assert r.status_code == 401 and "Unknown or revoked token" in r.text
    assert "<code>trainjobs tokens create</code>" in r.text and "`" not in r.text  # issue 37: no literal backticks
    assert sessions.SESSION_COOKIE not in client.cookies
    # A valid token through a form that did not come from this browser's sign-in page.
    r = client.post("/ui/login", data={"csrf": "0" * 64, "token": tokens["admin"]})
    assert r.status_code == 403 and sessions.SESSION_COOKIE not in client.cookies
    stranger = TestClient(client.app)  # no sign-in cookie at all
    r = stranger.post("/ui/login", data={"csrf": csrf_of(page.text), "token": tokens["admin"]})
    assert r.status_code == 403 and sessions.SESSION_COOKIE not in stranger.cookies


@pytest.mark.parametrize("target, lands", [
    ("/ui/jobs/abc?x=1", "/ui/jobs/abc?x=1"), ("https://evil.example/ui", "/ui/jobs"), ("//evil.example/ui", "/ui/jobs"),
    ("/v1/tokens", "/ui/jobs"), ("/ui\\@evil", "/ui/jobs"), ("/ui/logout", "/ui/jobs"), ("", "/ui/jobs")])
def test_sign_in_leads_only_to_pages_of_this_ui(client, tokens, target, lands):
    page = client.get("/ui/login")
    r = client.post("/ui/login", data={"csrf": csrf_of(page.text), "token": tokens["viewer"], "next": target},
                    follow_redirects=False)
    assert r.headers["location"] == lands


def test_sign_out_needs_its_csrf_token_then_ends_the_session(app, client, tokens):
    c = new_client(app, tokens["viewer"])
    assert c.post("/ui/logout", data={}).status_code == 403           # no CSRF token: refused
    assert c.get("/ui/jobs").status_code == 200                        # still signed in
    page = c.get("/ui/jobs")
    r = c.post("/ui/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    assert 'trainjobs_session=""' in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
    assert c.get("/ui/jobs", headers={"Accept": "text/html"}, follow_redirects=False).status_code == 303


def test_a_tampered_or_expired_cookie_is_no_session(app, client, tokens, monkeypatch):
    c = new_client(app, tokens["viewer"])
    value = c.cookies[sessions.SESSION_COOKIE]
    c.cookies.set(sessions.SESSION_COOKIE, value[:-2] + ("AA" if not value.endswith("AA") else "BB"), path="/ui")
    assert c.get("/ui/jobs", follow_redirects=False).status_code == 401

    import itsdangerous.timed
    real = itsdangerous.timed.TimestampSigner.get_timestamp
    monkeypatch.setattr(itsdangerous.timed.TimestampSigner, "get_timestamp",
                        lambda self: real(self) - app.state.services.ui_settings.session_max_age_seconds - 5)
    old = new_client(app, tokens["viewer"])  # signed in "long ago"
    monkeypatch.setattr(itsdangerous.timed.TimestampSigner, "get_timestamp", real)
    assert old.get("/ui/jobs", follow_redirects=False).status_code == 401


def test_revoking_the_token_ends_its_ui_sessions(app, client, tokens):
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    c = new_client(app, tokens["member"])
    assert c.get("/ui/jobs").status_code == 200
    token_id = next(t["id"] for t in client.get("/v1/tokens", headers=admin).json() if t["name"] == "member-alice")
    assert client.post(f"/v1/tokens/{token_id}/revoke", headers=admin).status_code == 200
    assert c.get("/ui/jobs", follow_redirects=False).status_code == 401


def test_the_signing_key_is_made_once_stored_and_shared_by_every_worker(api_client, db_url, work_dir, tokens, session_factory):
    from tests.backends.localkit import settings_for
    settings = settings_for(db_url, work_dir, run_reconciler=False)
    with api_client(settings) as one, api_client(settings) as two:
        sign_in(one, tokens["viewer"])
        two.cookies = one.cookies          # the same browser, answered by another worker
        assert two.get("/ui/jobs").status_code == 200
    with session_factory() as s:
        keys = s.scalars(select(ServiceSecret.value).where(ServiceSecret.name == sessions.SECRET_NAME)).all()
    assert len(keys) == 1 and len(keys[0]) >= 40

    # A configured secret replaces the stored one: cookies signed with another key are refused.
    configured = settings_for(db_url, work_dir, run_reconciler=False, ui_session_secret="x" * 40)
    with api_client(configured) as three:
        three.cookies = one.cookies
        assert three.get("/ui/jobs", follow_redirects=False).status_code == 401
        sign_in(three, tokens["viewer"])
        assert three.get("/ui/jobs").status_code == 200
        payload = three.cookies[sessions.SESSION_COOKIE]
    assert sessions.read_session("x" * 40, payload, 60) is not None


def test_every_form_carries_the_session_csrf_token(app, client, api, tokens):
    from tests.ui.conftest import template_body
    body = template_body("t1")
    api.template("t1", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    pages = [c.get(u).text for u in ("/ui/jobs", "/ui/templates", "/ui/templates/t1/launch")]
    token = csrf_of(pages[0])
    for html in pages:
        for form in re.findall(r"<form[^>]*method=\"post\".*?</form>", html, re.S):
            assert f'name="csrf" value="{token}"' in form
    # Another session's token is not this session's.
    other = new_client(app, tokens["member"])
    assert csrf_of(other.get("/ui/jobs").text) != token
