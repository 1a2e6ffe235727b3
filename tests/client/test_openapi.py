"""The OpenAPI schema is fit for code generation: stable operation ids, one
response model per status, examples on every request body that the service
accepts, and documented problem codes that the service really returns."""
from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conftest import ONE_DATABASE, bearer, make_token

pytestmark = ONE_DATABASE

OPERATIONS = {
    ("POST", "/v1/templates"): "templates_create", ("GET", "/v1/templates"): "templates_list",
    ("GET", "/v1/templates/{name}"): "templates_get", ("PUT", "/v1/templates/{name}"): "templates_update",
    ("GET", "/v1/templates/{name}/versions"): "templates_versions",
    ("POST", "/v1/templates/{name}/archive"): "templates_archive",
    ("POST", "/v1/templates/{name}/unarchive"): "templates_unarchive",
    ("POST", "/v1/jobs"): "jobs_create", ("GET", "/v1/jobs"): "jobs_list", ("GET", "/v1/jobs/{job_id}"): "jobs_get",
    ("GET", "/v1/jobs/{job_id}/events"): "jobs_events", ("POST", "/v1/jobs/{job_id}/cancel"): "jobs_cancel",
    ("POST", "/v1/jobs/{job_id}/relaunch"): "jobs_relaunch",
    ("GET", "/v1/jobs/{job_id}/logs"): "jobs_logs",
    ("GET", "/v1/tokens/me"): "tokens_me", ("GET", "/v1/tokens"): "tokens_list", ("POST", "/v1/tokens"): "tokens_create",
    ("POST", "/v1/tokens/{token_id}/revoke"): "tokens_revoke",
    ("GET", "/v1/jobs/{job_id}/epochs"): "jobs_epochs",
    ("POST", "/v1/webhooks"): "webhooks_create", ("GET", "/v1/webhooks"): "webhooks_list",
    ("GET", "/v1/webhooks/{webhook_id}"): "webhooks_get", ("DELETE", "/v1/webhooks/{webhook_id}"): "webhooks_delete",
    ("POST", "/v1/webhooks/{webhook_id}/pause"): "webhooks_pause",
    ("POST", "/v1/webhooks/{webhook_id}/resume"): "webhooks_resume",
    ("POST", "/v1/webhooks/{webhook_id}/test"): "webhooks_test",
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): "webhooks_deliveries",
    ("GET", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}"): "webhooks_delivery",
    ("POST", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): "webhooks_redeliver",
    ("GET", "/v1/teams/{team}/limits"): "teams_limits_get", ("PUT", "/v1/teams/{team}/limits"): "teams_limits_set",
    ("GET", "/v1/teams/{team}/usage"): "teams_usage",
    ("GET", "/v1/queue"): "queue_get", ("GET", "/v1/usage"): "usage_get",
    ("POST", "/v1/sweeps"): "sweeps_create", ("GET", "/v1/sweeps"): "sweeps_list",
    ("GET", "/v1/sweeps/{sweep_id}"): "sweeps_get", ("POST", "/v1/sweeps/{sweep_id}/cancel"): "sweeps_cancel",
    ("POST", "/v1/sweeps/{sweep_id}/resume"): "sweeps_resume",
    ("POST", "/v1/templates:import"): "templates_import", ("GET", "/v1/templates/{name}/export"): "templates_export",
    ("GET", "/v1/jobs/{job_id}/export"): "jobs_export",
    ("GET", "/v1/capacity"): "capacity_list", ("GET", "/v1/capacity/{backend}"): "capacity_get",
    ("PUT", "/v1/capacity/{backend}"): "capacity_set", ("DELETE", "/v1/capacity/{backend}"): "capacity_reset",
    ("GET", "/v1/shares"): "shares_list", ("GET", "/v1/teams/{team}/shares/{backend}"): "shares_get",
    ("PUT", "/v1/teams/{team}/shares/{backend}"): "shares_set",
    ("DELETE", "/v1/teams/{team}/shares/{backend}"): "shares_delete",
    ("GET", "/v1/priority-classes"): "priority_classes_list",
    ("GET", "/v1/priority-classes/{name}"): "priority_classes_get",
    ("PUT", "/v1/priority-classes/{name}"): "priority_classes_set",
    ("DELETE", "/v1/priority-classes/{name}"): "priority_classes_delete", ("GET", "/v1/audit"): "audit_list",
    ("GET", "/healthz"): "ops_healthz", ("GET", "/readyz"): "ops_readyz", ("GET", "/metrics"): "ops_metrics",
}
PROBLEM = "application/problem+json"
# The server runs in the test's process: on a loaded host (2 cores, TensorFlow tests beside) one
# answer took longer than httpx's default 5 s. The tests check the answers, not their speed.
SLOW_HOST = 60


@pytest.fixture
def schema(server) -> dict:
    return httpx.get(f"{server}/openapi.json", timeout=60).json()


def operations(schema):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            yield method.upper(), path, op


def _resolve(schema, node):
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_operation_ids_are_stable_names(schema):
    assert {(m, p): op["operationId"] for m, p, op in operations(schema)} == OPERATIONS


def test_one_model_per_status_and_problems_typed(schema):
    for method, path, op in operations(schema):
        for status, answer in op["responses"].items():
            for _media, content in answer.get("content", {}).items():
                assert "anyOf" not in content["schema"] and "oneOf" not in content["schema"], (method, path, status)
            if int(status) >= 400 and path.startswith("/v1"):
                assert answer["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/ProblemDetails"}
    create = schema["paths"]["/v1/jobs"]["post"]["responses"]
    assert create["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/JobOut")
    assert create["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/JobPreview")
    progress = _resolve(schema, schema["components"]["schemas"]["JobSummary"]["properties"]["progress"]["anyOf"][0])
    assert {"epoch", "epochs", "metrics", "phase"} <= set(progress["properties"])


def _example(schema, op) -> dict:
    body = _resolve(schema, op["requestBody"]["content"]["application/json"]["schema"])
    assert body.get("examples"), op["operationId"]
    return body["examples"][0]


def test_every_request_body_has_an_example_the_service_accepts(schema, server, token, db_url):
    h = bearer(token)
    with_bodies = [(m, p, op) for m, p, op in operations(schema) if "requestBody" in op]
    assert {op["operationId"] for _, _, op in with_bodies} == {"templates_create", "templates_update",
                                                                "jobs_create", "tokens_create", "webhooks_create",
                                                                "teams_limits_set", "jobs_relaunch", "sweeps_create",
                                                                "templates_import", "capacity_set", "shares_set",
                                                                "priority_classes_set"}
    examples = {op["operationId"]: _example(schema, op) for _, _, op in with_bodies}
    made = httpx.post(f"{server}/v1/templates", json=examples["templates_create"], headers=h, timeout=SLOW_HOST)
    assert made.status_code == 201, made.text
    name = examples["templates_create"]["name"]
    assert httpx.put(f"{server}/v1/templates/{name}", json=examples["templates_update"], headers=h, timeout=SLOW_HOST).status_code == 200
    assert httpx.post(f"{server}/v1/tokens", json=examples["tokens_create"], headers=h, timeout=SLOW_HOST).status_code == 201
    # Its host does not resolve here: accepted, and checked again at every delivery.
    assert httpx.post(f"{server}/v1/webhooks", json=examples["webhooks_create"], headers=h, timeout=SLOW_HOST).status_code == 201
    job = {**examples["jobs_create"], "template": name, "parameters": {}}
    preview = httpx.post(f"{server}/v1/jobs", params={"dry_run": "true"}, json=job, headers=h, timeout=SLOW_HOST)
    assert preview.status_code == 200, preview.text
    limits = httpx.put(f"{server}/v1/teams/alpha/limits", json=examples["teams_limits_set"], headers=h, timeout=SLOW_HOST)
    assert limits.status_code == 200, limits.text
    # A relaunch's example changes a stored job: the model the endpoint parses it with accepts it.
    from service.jobs.schemas import JobRelaunch
    assert JobRelaunch.model_validate(examples["jobs_relaunch"]).labels == {"try": "2"}
    # The sweep example searches the demo template's parameters (checked and planned, not started).
    from service.demo import demo_template
    demo = demo_template().model_dump(mode="json", exclude_none=True)
    assert httpx.post(f"{server}/v1/templates", json=demo, headers=h, timeout=SLOW_HOST).status_code == 201
    planned = httpx.post(f"{server}/v1/sweeps", params={"dry_run": "true"}, json=examples["sweeps_create"],
                         headers=h, timeout=SLOW_HOST)
    assert planned.status_code == 200 and planned.json()["trial_count"] == 4, planned.text
    imported = httpx.post(f"{server}/v1/templates:import", json=examples["templates_import"], headers=h, timeout=SLOW_HOST)
    assert imported.status_code == 201, imported.text
    ops = bearer(make_token(db_url, "alpha", "operator", name="ops"))
    for path, op_id in (("/v1/capacity/local", "capacity_set"), ("/v1/teams/alpha/shares/local", "shares_set"),
                        ("/v1/priority-classes/urgent", "priority_classes_set")):
        done = httpx.put(f"{server}{path}", json=examples[op_id], headers=ops, timeout=SLOW_HOST)
        assert done.status_code == 200, (op_id, done.text)


def _call(server, method, path, op, schema, headers):
    url = server + path.format(job_id=uuid.uuid4(), token_id=uuid.uuid4(), name="no-such-template",
                               webhook_id=uuid.uuid4(), delivery_id=uuid.uuid4(), team="no-such-team",
                               sweep_id=uuid.uuid4(), backend="no-such-backend")
    body = _example(schema, op) if "requestBody" in op else None
    # GET /v1/usage refuses a viewer only another team's use over time (its 403).
    params = {"team": "beta"} if op["operationId"] == "usage_get" else None
    return httpx.request(method, url, json=body, params=params, headers=headers, timeout=30)


def test_documented_401_403_404_are_what_the_service_answers(schema, server, db_url, viewer_token):
    # An operator of team alpha: every route's own 404 (an admin's for the team routes).
    token = make_token(db_url, "alpha", "operator")
    make_token(db_url, "beta", "viewer")    # another team, whose use over time alpha's viewer may not read
    checked = 0
    for method, path, op in operations(schema):
        if not path.startswith("/v1"):
            continue
        documented = set(op["responses"])
        assert "401" in documented and "503" in documented, op["operationId"]
        anonymous = _call(server, method, path, op, schema, {})
        assert anonymous.status_code == 401 and anonymous.headers["content-type"] == PROBLEM, op["operationId"]
        as_viewer = _call(server, method, path, op, schema, bearer(viewer_token))
        # 403 is documented exactly where a viewer is refused.
        assert (as_viewer.status_code == 403) == ("403" in documented), (op["operationId"], as_viewer.status_code)
        if "{" in path and op["operationId"] != "priority_classes_set":   # a PUT that creates the class
            as_admin = _call(server, method, path, op, schema, bearer(token))
            assert as_admin.status_code == 404 and "404" in documented, (op["operationId"], as_admin.text)
        checked += 1
    assert checked == 55   # with the shared-capacity operations, GET /v1/queue and GET /v1/usage
