"""Where deliveries may go, and how an attempt fails: non-public addresses refused at
creation and again at every attempt (DNS can change, and so can the setting), redirects
not followed, a receiver that does not answer in time, giving up, and bounded payloads."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from service.lifecycle.engine import Engine
from service.lifecycle.states import JobState
from service.webhooks import events
from service.webhooks.destinations import parse_networks
from service.webhooks.dispatcher import Dispatcher, backoff
from service.webhooks.limits import WebhookLimits
from tests.apikit import assert_problem
from tests.webhooks.conftest import LOOPBACK, subscribe

REFUSED = ["http://127.0.0.1:9/x", "http://127.8.9.10/", "http://10.1.2.3/", "http://172.16.0.1/",
           "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/",
           "http://0.0.0.0/", "http://224.0.0.1/", "http://[::1]/", "http://[fe80::1]/", "http://[fd00::1]/",
           "http://[::ffff:127.0.0.1]/", "http://[64:ff9b::a00:1]/", "http://localhost:8080/",
           # Deprecated IPv6 forms with an IPv4 address inside: IPv4-compatible (::/96), IPv4-translated
           # (::ffff:0:0:0/96, RFC 2765), and 6to4 of a private address.
           "http://[::127.0.0.1]/", "http://[::ffff:0:7f00:1]/", "http://[::a9fe:a9fe]/", "http://[::8.8.8.8]/",
           "http://[2002:7f00:1::1]/", "http://[2002:a9fe:a9fe::]/", "http://[::]/"]


@pytest.mark.parametrize("address, public", [
    ("::ffff:8.8.8.8", True), ("64:ff9b::808:808", True), ("2606:4700:4700::1111", True), ("8.8.8.8", True),
    ("::ffff:0:808:808", False), ("::808:808", False), ("2002:808:808::1", False), ("64:ff9b::a00:1", False),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),
])
def test_embedded_ipv4_addresses_are_judged_by_what_they_embed(address, public):
    import ipaddress

    from service.webhooks.destinations import is_public
    assert is_public(ipaddress.ip_address(address)) is public


@pytest.fixture
def strict(make_client):
    """No network allowed beyond the public internet; no controller."""
    return make_client(webhook_allowed_networks=[], run_reconciler=False)


# Every non-global range, one address each (IANA's special-purpose registries), and public ones beside them.
NOT_GLOBAL = {
    "fec0::1": "deprecated site-local fec0::/10 (Python 3.11 calls it global)",
    "feff:ffff::1": "the end of site-local", "fe80::1": "link-local", "fc00::1": "unique local",
    "fd12:3456::1": "unique local", "ff02::1": "multicast", "ff0e::1": "global-scope multicast",
    "::": "unspecified", "::1": "loopback", "::127.0.0.1": "IPv4-compatible loopback",
    "::8.8.8.8": "IPv4-compatible (deprecated)", "::ffff:10.0.0.1": "IPv4-mapped private",
    "::ffff:169.254.169.254": "IPv4-mapped metadata", "::ffff:0:8.8.8.8": "IPv4-translated",
    "64:ff9b::10.0.0.1": "NAT64 of a private address", "64:ff9b:1::8.8.8.8": "local-use NAT64",
    "100::1": "discard-only", "5f00::1": "SRv6 SIDs", "2001::1": "Teredo", "2001:0:4136:e378::1": "Teredo",
    "2001:2::1": "benchmarking", "2001:10::1": "ORCHID", "2001:20::1": "ORCHIDv2", "2001:db8::1": "documentation",
    "3fff::1": "documentation (RFC 9637)", "2002:808:808::1": "6to4", "2002:a00:1::1": "6to4 of a private address",
    "4000::1": "unassigned, outside 2000::/3", "e000::1": "unassigned",
    "0.0.0.1": "this network", "10.0.0.1": "private", "100.64.0.1": "shared (CGN)", "127.0.0.1": "loopback",
    "169.254.169.254": "link-local (cloud metadata)", "172.31.255.255": "private", "192.0.0.1": "IETF protocol",
    "192.0.0.9": "IETF protocol (PCP anycast)", "192.0.2.1": "documentation", "192.88.99.1": "6to4 relay",
    "192.168.0.1": "private", "198.18.0.1": "benchmarking", "198.19.255.255": "benchmarking",
    "198.51.100.1": "documentation", "203.0.113.1": "documentation", "224.0.0.1": "multicast",
    "239.255.255.250": "multicast", "240.0.0.1": "reserved", "255.255.255.255": "broadcast",
}
GLOBAL = ["8.8.8.8", "1.1.1.1", "192.0.1.1", "198.17.255.255", "2606:4700:4700::1111", "2001:4860:4860::8888",
          "2a00:1450:4001::1", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2003::1"]


@pytest.mark.parametrize("address", sorted(NOT_GLOBAL))
def test_every_non_global_range_is_refused(address):
    """The guard's own table, not Python's (whose tables vary by release)."""
    import ipaddress

    from service.webhooks.destinations import is_public
    assert not is_public(ipaddress.ip_address(address)), NOT_GLOBAL[address]


def test_the_api_refuses_every_non_global_range(strict):
    for address, what in NOT_GLOBAL.items():
        host = f"[{address}]" if ":" in address else address
        problem = assert_problem(strict.post("/v1/webhooks", json={"url": f"http://{host}/hook"}), 422, "url")
        assert "not a public address" in problem["errors"][0]["message"], what


@pytest.mark.parametrize("address", GLOBAL)
def test_global_addresses_are_accepted(address):
    import ipaddress

    from service.webhooks.destinations import is_public
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("url", REFUSED)
def test_non_public_destinations_are_refused_at_creation(strict, url):
    problem = assert_problem(strict.post("/v1/webhooks", json={"url": url}), 422, "url")
    error, = problem["errors"]
    assert "not a public address" in error["message"]
    assert "TRAINJOBS_WEBHOOK_ALLOWED_NETWORKS" in error["fix"]


def test_an_allowed_network_is_accepted(make_client, receiver):
    client = make_client(webhook_allowed_networks=["127.0.0.0/8"], run_reconciler=False)
    subscribe(client, receiver.url)
    assert_problem(client.post("/v1/webhooks", json={"url": "http://10.0.0.1/"}), 422, "url")


def test_a_bad_allowed_network_stops_the_service_from_starting():
    with pytest.raises(ValueError, match="not a network"):
        parse_networks(["10.0.0.0/33"])


def _dispatcher(client, **limits) -> Dispatcher:
    base = WebhookLimits(allowed_networks=parse_networks(LOOPBACK), retry_initial=0.01, retry_jitter=0.0,
                         request_timeout=5.0)
    return Dispatcher(client.app.state.services.session_factory, Engine(), dataclasses.replace(base, **limits), fence=None)


def _only(client, hook) -> dict:
    delivery, = client.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
    return client.get(f"/v1/webhooks/{hook['id']}/deliveries/{delivery['id']}").json()


@pytest.fixture
def quiet(make_client):
    return make_client(run_reconciler=False)


def test_a_destination_refused_since_creation_is_refused_at_delivery(quiet, receiver):
    hook = subscribe(quiet, receiver.url)
    quiet.post(f"/v1/webhooks/{hook['id']}/test")
    # The name now points elsewhere, or the operator narrowed the setting: checked again at send time.
    _dispatcher(quiet, allowed_networks=(), max_attempts=1).run_once()
    detail = _only(quiet, hook)
    assert detail["status"] == "failed" and detail["attempts"] == 1
    assert "127.0.0.1 is not a public address" in detail["attempt_log"][0]["error"]
    assert detail["attempt_log"][0]["status_code"] is None
    assert receiver.nothing_more()
    # Redelivered once it is allowed again: delivered.
    quiet.post(f"/v1/webhooks/{hook['id']}/deliveries/{detail['id']}/redeliver")
    _dispatcher(quiet).run_once()
    assert receiver.next("the redelivery").verify(hook["secret"])["type"] == "webhook.test"


def test_redirects_are_not_followed(quiet, receiver):
    receiver.answers = [(302, {"Location": "http://169.254.169.254/latest/meta-data/"})]
    hook = subscribe(quiet, receiver.url)
    quiet.post(f"/v1/webhooks/{hook['id']}/test")
    _dispatcher(quiet, max_attempts=1).run_once()
    receiver.next("the one request")
    detail = _only(quiet, hook)
    assert detail["status"] == "failed" and detail["last_status_code"] == 302
    assert "redirect" in detail["last_error"]
    assert receiver.nothing_more()


def test_a_receiver_that_does_not_answer_in_time_is_a_failed_attempt(quiet, receiver):
    receiver.holding = True
    hook = subscribe(quiet, receiver.url)
    quiet.post(f"/v1/webhooks/{hook['id']}/test")
    _dispatcher(quiet, request_timeout=0.5, max_attempts=1).run_once()
    receiver.held.get(timeout=5)
    detail = _only(quiet, hook)
    assert detail["status"] == "failed"
    assert "no complete answer within 0.5 s" in detail["attempt_log"][0]["error"]


def test_retries_stop_at_the_window_or_the_most_attempts(quiet, receiver):
    receiver.answers = [500] * 10
    hook = subscribe(quiet, receiver.url)
    quiet.post(f"/v1/webhooks/{hook['id']}/test")
    _dispatcher(quiet, retry_window=0).run_once()       # no time left for a retry: failed at once
    assert _only(quiet, hook)["status"] == "failed"

    other = subscribe(quiet, receiver.url)
    quiet.post(f"/v1/webhooks/{other['id']}/test")
    dispatcher = _dispatcher(quiet, max_attempts=2, retry_initial=0.01)
    while _only(quiet, other)["status"] == "pending":
        dispatcher.run_once()
    detail = _only(quiet, other)
    assert detail["status"] == "failed" and [a["number"] for a in detail["attempt_log"]] == [1, 2]


def test_backoff_doubles_up_to_its_cap():
    limits = WebhookLimits(retry_initial=10, retry_max_interval=100, retry_jitter=0)
    assert [backoff(n, limits) for n in range(1, 7)] == [10, 20, 40, 80, 100, 100]
    jittered = WebhookLimits(retry_initial=10, retry_max_interval=100, retry_jitter=0.1)
    assert all(9 <= backoff(1, jittered) <= 11 for _ in range(200))
    assert backoff(1000, limits) == 100


def _job(**extra) -> SimpleNamespace:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    values = dict(id="0b7d2a44-1c52-4c38-9a8a-6c1f0e0f4b1e", display_name="run", template_name="t",
                  template_version=1, backend="local", labels={}, created_by="me", created_at=at, started_at=at,
                  ended_at=at, console_url=None, error=None, progress=None)
    values.update(extra)
    return SimpleNamespace(**values)


@pytest.mark.parametrize("max_bytes", [2048, 4096, 65_536])
def test_payloads_are_cut_to_the_setting(max_bytes):
    job = _job(labels={f"k{i:02d}": "v" * 63 for i in range(64)}, display_name="d" * 128,
               error={"message": "x" * 60_000, "code": 1}, progress={"epoch": 1, "metrics": {f"m{i}": 1.0
                                                                                            for i in range(500)}})
    payload = events.job_payload("job.failed", job, "alpha", from_state=JobState.RUNNING, to_state=JobState.FAILED,
                                 reason="r" * 2000, actor="controller", at=job.created_at, public_url=None,
                                 max_bytes=max_bytes)
    assert len(events.body_bytes(payload)) <= max_bytes
    assert payload["data"]["truncated"] is True
    assert payload["data"]["job"]["id"] == job.id and payload["data"]["to_state"] == "FAILED"
    assert len(events.body_bytes(events.slack_payload(payload, max_bytes))) <= max_bytes
    wide = {**payload, "data": {**payload["data"], "reason": "\u00e9\U0001F600" * 5000}}  # 2-4 bytes each
    assert len(events.body_bytes(events.slack_payload(wide, 2048))) <= 2048


def test_a_small_payload_is_untouched():
    payload = events.job_payload("job.succeeded", _job(), "alpha", from_state=JobState.RUNNING,
                                 to_state=JobState.SUCCEEDED, reason="done", actor="local",
                                 at=datetime(2026, 1, 1, tzinfo=UTC), public_url=None, max_bytes=65_536)
    assert "truncated" not in payload["data"] and payload["data"]["reason"] == "done"
    assert payload["data"]["job"]["url"] is None
    assert events.slack_payload(payload)["text"].startswith(":white_check_mark: Job *run* (t v1, team alpha)")


def test_slack_text_escapes_what_the_job_says():
    payload = events.job_payload("job.failed", _job(display_name="<!channel> & co"), "alpha",
                                 from_state=JobState.RUNNING, to_state=JobState.FAILED, reason="<@U123> broke it",
                                 actor="local", at=datetime(2026, 1, 1, tzinfo=UTC),
                                 public_url="https://t.example.com", max_bytes=65_536)
    text = events.slack_payload(payload)["text"]
    assert "<!channel>" not in text and "&lt;!channel&gt; &amp; co" in text
    assert "<@U123>" not in text and "&lt;@U123&gt;" in text


def test_a_placed_job_of_several_backends_says_where_and_why():
    why = "placed on sim2: sim1: 0 of 1 core free; sim2: admitted, 1 of 1 core free"
    payload = events.job_payload("job.running", _job(backend="sim2", placement=why), "alpha",
                                 from_state=JobState.PENDING, to_state=JobState.RUNNING, reason="running",
                                 actor="sim2", at=datetime(2026, 1, 1, tzinfo=UTC), public_url=None, max_bytes=65_536)
    assert payload["data"]["job"]["backend"] == "sim2" and payload["data"]["job"]["placement"] == why
    plain = events.job_payload("job.running", _job(placement=None), "alpha", from_state=JobState.PENDING,
                               to_state=JobState.RUNNING, reason="running", actor="local",
                               at=datetime(2026, 1, 1, tzinfo=UTC), public_url=None, max_bytes=65_536)
    assert "placement" not in plain["data"]["job"]   # a job of one backend: the payload as before
