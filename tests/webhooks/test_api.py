"""/v1/webhooks as an API: admins only (viewers and members 403), another team's webhook
is a 404, bad input a 422 naming the field and its fix, the per-team limit a 409, the
delivery log paged, pause and resume. On SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from tests.apikit import assert_problem
from tests.conftest import bearer, make_token
from tests.waiting import wait_for
from tests.webhooks.conftest import (
    QUICK,
    add_template,
    new_id,
    subscribe,
    wait_delivery,
)


@pytest.fixture
def quiet(make_client):
    """No controller: nothing is sent, so rows stay as the API left them."""
    return make_client(run_reconciler=False, local_max_running_jobs=0, webhook_max_per_team=3)


def _routes(hook_id: str, delivery_id: str) -> list[tuple[str, str, dict | None]]:
    base = f"/v1/webhooks/{hook_id}"
    return [("GET", base, None), ("DELETE", base, None), ("POST", f"{base}/pause", None),
            ("POST", f"{base}/resume", None), ("POST", f"{base}/test", None), ("GET", f"{base}/deliveries", None),
            ("GET", f"{base}/deliveries/{delivery_id}", None),
            ("POST", f"{base}/deliveries/{delivery_id}/redeliver", None)]


def test_only_admins_manage_webhooks(quiet, tokens, receiver):
    hook = subscribe(quiet, receiver.url)
    delivery = quiet.post(f"/v1/webhooks/{hook['id']}/test").json()
    for role in ("viewer", "member"):
        h = bearer(tokens[role])
        calls = [("POST", "/v1/webhooks", {"url": receiver.url}), ("GET", "/v1/webhooks", None),
                 *_routes(hook["id"], delivery["id"])]
        for method, path, body in calls:
            r = quiet.request(method, path, json=body, headers=h)
            assert_problem(r, 403)
            assert "admin" in r.json()["detail"], (method, path)
    r = quiet.get("/v1/webhooks", headers={"Authorization": ""})
    assert_problem(r, 401)
    assert [h["id"] for h in quiet.get("/v1/webhooks").json()] == [hook["id"]]


def test_another_teams_webhook_is_not_found(quiet, db_url, receiver):
    hook = subscribe(quiet, receiver.url)
    delivery = quiet.post(f"/v1/webhooks/{hook['id']}/test").json()
    other = bearer(make_token(db_url, "beta", "admin"))
    assert quiet.get("/v1/webhooks", headers=other).json() == []
    for method, path, body in _routes(hook["id"], delivery["id"]):
        body = assert_problem(quiet.request(method, path, json=body, headers=other), 404)
        assert hook["id"] in body["detail"]
    # Still there for its own team, untouched.
    assert quiet.get(f"/v1/webhooks/{hook['id']}").json()["paused"] is False
    # A delivery id of one webhook under another webhook of the same team is no delivery either.
    second = subscribe(quiet, receiver.url)
    assert_problem(quiet.get(f"/v1/webhooks/{second['id']}/deliveries/{delivery['id']}"), 404)
    assert_problem(quiet.get(f"/v1/webhooks/{new_id()}"), 404)


def test_create_get_list_delete(quiet, receiver):
    made = quiet.post("/v1/webhooks", json={"url": receiver.url, "description": "ci"})
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
    hook = made.json()
    assert made.headers["location"] == f"/v1/webhooks/{hook['id']}"
    assert hook["event_types"] == ["job.succeeded", "job.failed", "job.cancelled", "job.expired"]
    assert hook["format"] == "standard" and hook["description"] == "ci"
    got = quiet.get(f"/v1/webhooks/{hook['id']}").json()
    assert "secret" not in got and got["secret_prefix"] == hook["secret"][:10]
    assert "secret" not in quiet.get("/v1/webhooks").json()[0]
    quiet.post(f"/v1/webhooks/{hook['id']}/test")
    assert quiet.delete(f"/v1/webhooks/{hook['id']}").status_code == 204
    assert_problem(quiet.get(f"/v1/webhooks/{hook['id']}"), 404)
    assert_problem(quiet.get(f"/v1/webhooks/{hook['id']}/deliveries"), 404)
    assert quiet.get("/v1/webhooks").json() == []


@pytest.mark.parametrize("body,field,words", [
    ({"url": "ftp://example.com/x"}, "url", "scheme"),
    ({"url": "hooks.example.com/x"}, "url", "scheme"),
    ({"url": "https://user:pw@hooks.example.com/x"}, "url", "credentials"),
    ({"url": "https:///path"}, "url", "no host"),
    ({"url": "https://hooks.example.com:99999/"}, "url", "valid URL"),
    ({"url": "https://exa mple.com/"}, "url", "host name"),
    ({"url": "x" * 2049}, "url", "2048"),
    ({"url": "https://hooks.example.com/", "event_types": ["job.exploded"]}, "event_types.0", "job.succeeded"),
    ({"url": "https://hooks.example.com/", "event_types": []}, "event_types", "at least 1"),
    ({"url": "https://hooks.example.com/", "event_types": ["job.failed", "job.failed"]}, "event_types", "twice"),
    ({"url": "https://hooks.example.com/", "format": "teams"}, "format", "slack"),
    ({"url": "https://hooks.example.com/", "secret": "mine"}, "secret", "unknown field"),
    ({}, "url", "required"),
])
def test_bad_input_is_a_422_naming_the_field(quiet, body, field, words):
    problem = assert_problem(quiet.post("/v1/webhooks", json=body), 422, field)
    assert words in " ".join(f"{e['message']} {e.get('fix', '')}" for e in problem["errors"]), problem
    assert quiet.get("/v1/webhooks").json() == []


def test_a_name_that_does_not_resolve_yet_is_accepted(quiet):
    # Every delivery checks the name again; the log says why one fails.
    subscribe(quiet, "https://hooks.example.invalid/trainjobs")


def test_the_per_team_limit_is_a_409(quiet, db_url, receiver):
    for _ in range(3):
        subscribe(quiet, receiver.url)
    problem = assert_problem(quiet.post("/v1/webhooks", json={"url": receiver.url}), 409)
    assert "TRAINJOBS_WEBHOOK_MAX_PER_TEAM" in problem["detail"] and "delete" in problem["detail"]
    other = bearer(make_token(db_url, "beta", "admin"))   # another team has its own allowance
    assert quiet.post("/v1/webhooks", json={"url": receiver.url}, headers=other).status_code == 201


def test_the_delivery_log_is_paged_newest_first(quiet, receiver):
    hook = subscribe(quiet, receiver.url)
    made = [quiet.post(f"/v1/webhooks/{hook['id']}/test").json()["id"] for _ in range(5)]
    seen, cursor = [], None
    while True:
        page = quiet.get(f"/v1/webhooks/{hook['id']}/deliveries",
                         params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        assert len(page["items"]) <= 2
        seen += [d["id"] for d in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == made[::-1]
    assert quiet.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"status": "delivered"}).json()["items"] == []
    assert len(quiet.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"status": "pending"}).json()["items"]) == 5
    assert_problem(quiet.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"cursor": "bogus"}), 422, "cursor")
    assert_problem(quiet.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"limit": 0}), 422, "query.limit")
    detail = quiet.get(f"/v1/webhooks/{hook['id']}/deliveries/{made[0]}").json()
    assert detail["payload"]["type"] == "webhook.test" and detail["attempt_log"] == []


def test_a_paused_webhook_records_nothing_and_resumes_what_waited(make_client, receiver):
    # Retries an hour apart: only `resume` can bring the failed delivery back soon.
    client = make_client(webhook_retry_initial_seconds=3600)
    add_template(client, QUICK)
    hook = subscribe(client, receiver.url, event_types=["job.created"])
    receiver.answers = [500]
    client.post("/v1/jobs", json={"template": "quick"})
    receiver.next("the first, failing attempt")
    wait_for(lambda: wait_delivery(client, hook["id"], status="pending")[0]["attempts"] == 1,
             "the failed attempt recorded")

    paused = client.post(f"/v1/webhooks/{hook['id']}/pause").json()
    assert paused["paused"] is True and paused["paused_at"]
    client.post("/v1/jobs", json={"template": "quick"})         # not recorded while paused
    assert_problem(client.post(f"/v1/webhooks/{hook['id']}/test"), 409)
    resumed = client.post(f"/v1/webhooks/{hook['id']}/resume").json()
    assert resumed["paused"] is False and resumed["paused_at"] is None
    receiver.next("the held delivery, sent on resume")
    log = wait_delivery(client, hook["id"])
    assert [(d["status"], d["attempts"]) for d in log] == [("delivered", 2)]
