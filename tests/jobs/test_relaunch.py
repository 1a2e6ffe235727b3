"""Retry policies at submit (override policy, the service's limits, bad policies) and
POST /v1/jobs/{id}/relaunch, on SQLite and PostgreSQL, through the API. Jobs are only
stored here (no backend runs them): tests/lifecycle/test_retries_api.py runs them."""
import copy

import pytest

from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer

RETRY = {"max_attempts": 3, "exit_codes": [3], "backoff": {"initial_seconds": 5}}


def template(name, overridable=("workers.replica_count", "retry.max_attempts", "labels"), **spec_changes):
    body = copy.deepcopy(DEMO)
    body["name"] = name
    body["spec"]["overridable"] = list(overridable)
    body["spec"]["retry"] = copy.deepcopy(RETRY)
    body["spec"].update(spec_changes)
    return body


@pytest.fixture
def retrying(client):
    r = client.post("/v1/templates", json=template("retrying"))
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def member(tokens):
    return bearer(tokens["member"])


def submit(client, headers=None, **body):
    return client.post("/v1/jobs", headers=headers, json={"template": "retrying", **body})


def test_a_member_changes_the_retry_policy_only_where_the_template_lets_them(client, retrying, member):
    r = submit(client, member, overrides={"retry": {"max_attempts": 5}})
    assert r.status_code == 201, r.text
    assert r.json()["attempt"] == 1 and r.json()["retry_of"] is None and r.json()["attempts"][0]["attempt"] == 1
    body = assert_problem(submit(client, member, overrides={"retry": {"exit_codes": [1]}}), 403,
                          "overrides.retry.exit_codes")
    assert "only an admin" in body["detail"]
    # An admin may, and the first event says so.
    r = submit(client, overrides={"retry": {"exit_codes": [1]}})
    assert r.status_code == 201, r.text
    first = client.get(f"/v1/jobs/{r.json()['id']}/events").json()[0]
    assert "admin override beyond the template's overridable fields: retry.exit_codes" in first["reason"]


def test_the_services_limits_on_retries_are_enforced(client, retrying, settings, tokens):
    r = submit(client, overrides={"retry": {"max_attempts": settings.retry_max_attempts + 1}})
    body = assert_problem(r, 422, "spec.retry.max_attempts")
    assert "TRAINJOBS_RETRY_MAX_ATTEMPTS" in body["errors"][0]["fix"]
    r = submit(client, overrides={"retry": {"backoff": {"initial_seconds": 10, "max_seconds": 10**9}}})
    assert_problem(r, 422, "spec.retry.backoff.max_seconds")


def test_a_lower_limit_from_settings_applies(api_client, settings, tokens):
    strict = settings.model_copy(update={"retry_max_attempts": 2, "retry_max_backoff_seconds": 1})
    with api_client(strict, tokens["admin"]) as c:
        assert c.post("/v1/templates", json=template("retrying")).status_code == 201
        body = assert_problem(submit(c), 422, "spec.retry.max_attempts")
        assert {e["field"] for e in body["errors"]} == {"spec.retry.max_attempts", "spec.retry.backoff.initial_seconds",
                                                          "spec.retry.backoff.max_seconds"}


@pytest.mark.parametrize("retry, field", [
    ({"max_attempts": 0}, "spec.retry.max_attempts"),
    ({"exit_codes": [0]}, "spec.retry.exit_codes.0"),
    ({"exit_codes": [3], "fatal_exit_codes": [3]}, "spec.retry"),
    ({"backoff": {"multiplier": 0.5}}, "spec.retry.backoff.multiplier"),
    ({"backoff": {"initial_seconds": 60, "max_seconds": 10}}, "spec.retry"),
    ({"tries": 3}, "spec.retry.tries"),
])
def test_a_bad_retry_policy_is_a_422_naming_the_field(client, retry, field):
    body = template("bad-retry")
    body["spec"]["retry"] = retry
    assert_problem(client.post("/v1/templates", json=body), 422, field)


def test_relaunch_keeps_what_the_job_was_launched_with(client, retrying):
    job = submit(client, parameters={"epochs": 4}, overrides={"workers": {"replica_count": 2}},
                 labels={"team": "vision"}, display_name="nightly").json()
    r = client.post(f"/v1/jobs/{job['id']}/relaunch")
    assert r.status_code == 201, r.text
    again = r.json()
    assert r.headers["location"] == f"/v1/jobs/{again['id']}"
    assert again["id"] != job["id"] and again["relaunch_of"] == job["id"] and again["state"] == "QUEUED"
    for key in ("parameters", "overrides", "template", "backend", "display_name"):
        assert again[key] == job[key], key
    assert again["labels"]["team"] == "vision"
    first = client.get(f"/v1/jobs/{again['id']}/events").json()[0]
    assert first["reason"] == f"submitted; relaunch of job {job['id']}"
    assert client.get(f"/v1/jobs/{again['id']}").json()["relaunch_of"] == job["id"]


def test_relaunch_with_changes(client, retrying):
    job = submit(client, parameters={"epochs": 4, "batch_size": 8}, overrides={"workers": {"replica_count": 2}},
                 labels={"team": "vision"}).json()
    v2 = template("retrying")
    v2["description"] = "version 2"
    del v2["name"]
    r = client.put("/v1/templates/retrying", json=v2)
    assert r.status_code in (200, 201), r.text
    r = client.post(f"/v1/jobs/{job['id']}/relaunch", json={
        "parameters": {"epochs": 6}, "overrides": {"workers": {"machine_type": "n1-standard-8"}},
        "labels": {"try": "2"}, "display_name": "second go", "template_version": "latest"})
    assert r.status_code == 201, r.text
    again = r.json()
    assert again["parameters"] == {"epochs": 6, "batch_size": 8}
    assert again["overrides"] == {"workers": {"replica_count": 2, "machine_type": "n1-standard-8"}}
    assert again["labels"]["team"] == "vision" and again["labels"]["try"] == "2"
    assert again["display_name"] == "second go" and again["template"]["version"] == 2
    # A null in the change removes what the earlier job's overrides set.
    r = client.post(f"/v1/jobs/{job['id']}/relaunch", json={"overrides": {"workers": {"replica_count": None}}})
    assert r.json()["overrides"] == {"workers": {"replica_count": None}}
    assert r.json()["template"]["version"] == 1


def test_relaunch_goes_through_the_callers_override_policy(client, retrying, member):
    admins = submit(client, overrides={"retry": {"exit_codes": [1]}}).json()
    body = assert_problem(client.post(f"/v1/jobs/{admins['id']}/relaunch", headers=member), 403,
                          "overrides.retry.exit_codes")
    assert "only an admin" in body["detail"]
    # A member's own job relaunches, changed only as the template allows.
    mine = submit(client, member).json()
    assert client.post(f"/v1/jobs/{mine['id']}/relaunch", headers=member,
                       json={"overrides": {"workers": {"replica_count": 3}}}).status_code == 201
    assert_problem(client.post(f"/v1/jobs/{mine['id']}/relaunch", headers=member,
                               json={"overrides": {"chief": {"machine_type": "n1-standard-8"}}}),
                   403, "overrides.chief.machine_type")


def test_relaunch_refusals(client, retrying, tokens):
    job = submit(client).json()
    assert_problem(client.post(f"/v1/jobs/{job['id']}/relaunch", json={"colour": "red"}), 422)
    assert_problem(client.post(f"/v1/jobs/{job['id']}/relaunch", json={"template_version": 0}), 422)
    assert_problem(client.post(f"/v1/jobs/{job['id']}/relaunch", json={"template_version": 9}), 404)
    assert_problem(client.post(f"/v1/jobs/{job['id']}/relaunch", json={"parameters": {"epochs": 0}}), 422,
                   "parameters.epochs")
    assert_problem(client.post("/v1/jobs/00000000-0000-0000-0000-000000000000/relaunch"), 404)
    assert_problem(client.post(f"/v1/jobs/{job['id']}/relaunch", headers=bearer(tokens["viewer"])), 403)
    assert client.post("/v1/templates/retrying/archive").status_code in (200, 204)
    assert_problem(client.post(f"/v1/jobs/{job['id']}/relaunch"), 409)


def test_relaunch_is_retry_safe_with_an_idempotency_key(client, retrying):
    job = submit(client).json()
    one = client.post(f"/v1/jobs/{job['id']}/relaunch", headers={"Idempotency-Key": "k1"})
    two = client.post(f"/v1/jobs/{job['id']}/relaunch", headers={"Idempotency-Key": "k1"})
    assert one.status_code == two.status_code == 201
    assert one.json()["id"] == two.json()["id"] and two.headers["idempotent-replayed"] == "true"
