"""Deliveries end to end: a real job on the local backend, the controller's dispatcher,
a real receiver on 127.0.0.1 verifying each signature with the `standardwebhooks`
reference library; retries with backoff, redelivery, the Slack form. On SQLite and
PostgreSQL."""
from __future__ import annotations

import json
from datetime import datetime

import pytest
from standardwebhooks import Webhook
from standardwebhooks.exceptions import WebhookVerificationError

from tests.webhooks.conftest import (
    FAILING,
    QUICK,
    add_template,
    subscribe,
    wait_delivery,
    wait_job,
)


def test_a_finished_job_is_delivered_signed_and_verifiable(client, receiver):
    add_template(client, QUICK)
    ended = subscribe(client, receiver.url, event_types=["job.succeeded", "job.failed"])
    assert ended["secret"].startswith("whsec_") and ended["secret_prefix"] == ended["secret"][:10]
    every = subscribe(client, receiver.url + "/all", event_types=["job.state_changed"])
    job = client.post("/v1/jobs", json={"template": "quick"}).json()
    wait_job(client, job["id"], "SUCCEEDED", "FAILED")
    states = [e["to_state"] for e in client.get(f"/v1/jobs/{job['id']}/events").json()]
    assert states[-1] == "SUCCEEDED", states

    got: dict[str, list] = {"/hooks": [], "/hooks/all": []}
    while len(got["/hooks"]) < 1 or len(got["/hooks/all"]) < len(states):
        r = receiver.next(f"the deliveries (so far {got})")
        secret = ended["secret"] if r.path == "/hooks" else every["secret"]
        got[r.path].append((r, r.verify(secret)))   # raises unless the signature is right
    (request, payload), = got["/hooks"]
    assert payload["type"] == "job.succeeded"
    assert payload["data"]["job"]["id"] == job["id"] and payload["data"]["to_state"] == "SUCCEEDED"
    assert payload["data"]["from_state"] == states[-2]
    assert payload["data"]["job"]["template"] == {"name": "quick", "version": 1}
    assert payload["data"]["job"]["team"] == "alpha"
    assert payload["data"]["job"]["ui_url"] == f"https://trainjobs.example.com/ui/jobs/{job['id']}"
    assert request.headers["webhook-id"].startswith("msg_")
    assert request.headers["content-type"] == "application/json"
    # Signed with this webhook's secret, not with another's.
    with pytest.raises(WebhookVerificationError):
        Webhook(every["secret"]).verify(request.body, request.headers)
    # Every transition to the state_changed subscriber; the first is the creation. Deliveries
    # are sent concurrently, so they may arrive in any order: receivers order by timestamp.
    in_order = sorted((p for _, p in got["/hooks/all"]), key=lambda p: p["timestamp"])
    assert [p["data"]["to_state"] for p in in_order] == states
    assert in_order[0]["data"]["from_state"] is None

    log = wait_delivery(client, ended["id"])
    assert [(d["event_type"], d["status"], d["attempts"], d["last_status_code"]) for d in log] == \
        [("job.succeeded", "delivered", 1, 200)]
    assert log[0]["message_id"] == request.headers["webhook-id"] and log[0]["job_id"] == job["id"]
    assert receiver.nothing_more()


def test_a_receiver_that_fails_twice_gets_it_on_the_third_attempt(client, receiver):
    receiver.answers = [500, 503]
    hook = subscribe(client, receiver.url, event_types=["job.failed"])
    add_template(client, FAILING)
    job = client.post("/v1/jobs", json={"template": "failing"}).json()
    three = [receiver.next(f"attempt {i + 1}") for i in range(3)]
    # One message, retried: the same webhook-id each time, each attempt signed afresh.
    assert len({r.headers["webhook-id"] for r in three}) == 1
    for r in three:
        payload = r.verify(hook["secret"])
    assert payload["type"] == "job.failed" and payload["data"]["job"]["id"] == job["id"]
    assert payload["data"]["job"]["error"]["message"]

    delivery, = wait_delivery(client, hook["id"])
    detail = client.get(f"/v1/webhooks/{hook['id']}/deliveries/{delivery['id']}").json()
    attempts = detail["attempt_log"]
    assert [(a["number"], a["status_code"]) for a in attempts] == [(1, 500), (2, 503), (3, 200)]
    assert attempts[0]["error"] == "the receiver answered 500" and attempts[0]["response_body"] == "receiver says no"
    assert attempts[2]["error"] is None
    # Exponential backoff: the second wait (2 x 0.2 s) at least twice the first (0.2 s).
    at = [datetime.fromisoformat(a["at"]) for a in attempts]
    assert (at[1] - at[0]).total_seconds() >= 0.2
    assert (at[2] - at[1]).total_seconds() >= 0.4
    assert detail["status"] == "delivered" and detail["attempts"] == 3 and detail["payload"] == payload


def test_redelivery_sends_the_same_message_again(client, receiver):
    hook = subscribe(client, receiver.url)
    r = client.post(f"/v1/webhooks/{hook['id']}/test")
    assert r.status_code == 202, r.text
    first = receiver.next("the test event")
    assert first.verify(hook["secret"])["type"] == "webhook.test"
    original, = wait_delivery(client, hook["id"])

    again = client.post(f"/v1/webhooks/{hook['id']}/deliveries/{original['id']}/redeliver")
    assert again.status_code == 202, again.text
    assert again.json()["redelivery_of"] == original["id"] and again.json()["status"] == "pending"
    second = receiver.next("the redelivery")
    assert second.headers["webhook-id"] == first.headers["webhook-id"]
    assert second.body == first.body and second.verify(hook["secret"])
    log = wait_delivery(client, hook["id"], n=2)
    assert [d["id"] for d in log] == [again.json()["id"], original["id"]]  # newest first

    # A delivery still pending cannot be redelivered (it is being retried already).
    receiver.answers = [500] * 100
    pending = client.post(f"/v1/webhooks/{hook['id']}/test").json()
    receiver.next("the failing attempt")
    r = client.post(f"/v1/webhooks/{hook['id']}/deliveries/{pending['id']}/redeliver")
    assert r.status_code == 409 and "still being delivered" in r.json()["detail"]


def test_slack_format_posts_text_with_a_link(client, receiver):
    hook = subscribe(client, receiver.url, format="slack", event_types=["job.failed"])
    add_template(client, FAILING)
    job = client.post("/v1/jobs", json={"template": "failing"}).json()
    got = receiver.next("the slack message")
    body = json.loads(got.body)
    assert list(body) == ["text"]
    text = body["text"]
    assert f"<https://trainjobs.example.com/ui/jobs/{job['id']}|{job['display_name']}>" in text
    assert "*FAILED*" in text and "failing v1" in text and "team alpha" in text and ":x:" in text
    got.verify(hook["secret"])  # signed all the same (Slack ignores the headers)
    client.post(f"/v1/webhooks/{hook['id']}/test")
    assert "test message" in json.loads(receiver.next("the slack test").body)["text"]
