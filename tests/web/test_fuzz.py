"""Property-based fuzzing of the whole OpenAPI schema (schemathesis), on a real
server: no input may cause a 5xx, and every response must match the schema.

Driven by hand over every operation (rather than schema.parametrize) so that it
runs on the same live server and database fixtures as the other API tests. Then
explicit examples of inputs that once broke the service or crossed the trust
boundary, each with the 4xx it must get."""
import base64
import uuid

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from service.core.pagination import encode_cursor
from tests.conftest import bearer

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 40  # per operation: the whole run stays within a few minutes on 2 cores


# On SQLite, tests/web/test_openapi_conformance.py runs these checks and every other one over
# more cases (`schemathesis run`, all phases): here the same fuzzing runs on PostgreSQL only.
@pytest.mark.parametrize("db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
@pytest.mark.slow
def test_no_input_breaks_the_api(live_server, demo_live, tokens):
    schema = schemathesis.openapi.from_url(f"{live_server}/openapi.json", timeout=60)  # a busy 2-core host took >10 s once
    headers = bearer(tokens["admin"])
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    tried = {}
    for op in operations:
        count = 0

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            nonlocal count
            count += 1
            case.call_and_validate(base_url=live_server, headers=headers, checks=CHECKS, timeout=30)

        run()
        tried[op.label] = count
    print(tried)
    assert all(n > 0 for n in tried.values()), tried


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _raw(text: str) -> bytes:
    return text.encode()


def explicit_examples(job_id: str) -> list[tuple]:
    """(method, path, case arguments, role, the status it must get)."""
    job = {"job_id": job_id}
    demo = {"name": "mwms-demo"}
    post_job = ("POST", "/v1/jobs")
    year0 = "0001-01-01T00:00:00+14:00"
    year10000 = "9999-12-31T23:59:59-14:00"
    nan_template = ('{"name": "nan", "spec": {"container": {"image_uri": "x", "args": ["--lr=${lr}"]}}, '
                    '"parameters": [{"name": "lr", "type": "float", "default": NaN}]}')
    return [
        # integers past the INTEGER columns
        (*post_job, {"body": {"template": "mwms-demo", "template_version": 2**63}}, "admin", 422),
        ("GET", "/v1/templates/{name}", {"path_parameters": demo, "query": {"version": 2**63}}, "viewer", 422),
        # timestamps outside years 1-9999 in UTC, as parameters and inside forged cursors
        ("GET", "/v1/jobs", {"query": {"created_after": year0}}, "viewer", 422),
        ("GET", "/v1/jobs", {"query": {"created_before": year10000}}, "viewer", 422),
        ("GET", "/v1/jobs", {"query": {"cursor": encode_cursor(year0, uuid.uuid4())}}, "viewer", 422),
        ("GET", "/v1/jobs", {"query": {"cursor": encode_cursor(year10000, uuid.uuid4())}}, "viewer", 422),
        ("GET", "/v1/templates", {"query": {"cursor": encode_cursor("a\x00")}}, "viewer", 422),
        # log cursors: malformed, huge offsets, as `since` and as Last-Event-ID
        ("GET", "/v1/jobs/{job_id}/logs", {"path_parameters": job, "query": {"since": "!!!!"}}, "viewer", 422),
        ("GET", "/v1/jobs/{job_id}/logs", {"path_parameters": job, "query": {"since": _b64("0-0:999999999999999999")}},
         "viewer", 422),
        ("GET", "/v1/jobs/{job_id}/logs", {"path_parameters": job, "query": {"follow": True},
                                           "headers": {"Last-Event-ID": _b64("0-0:1,0-0:2")}}, "viewer", 422),
        # NaN and Infinity (Python's JSON parser takes them; JSON and the databases do not)
        (*post_job, {"body": _raw('{"template": "mwms-demo", "parameters": {"learning_rate": NaN}}'),
                     "media_type": "application/json"}, "admin", 422),
        (*post_job, {"body": _raw('{"template": "mwms-demo", "overrides": {"workers": {"replica_count": Infinity}}}'),
                     "media_type": "application/json"}, "admin", 422),
        (*post_job, {"body": _raw('{"template": "mwms-demo", "parameters": {"learning_rate": 1e400}}'),
                     "media_type": "application/json"}, "admin", 422),
        ("POST", "/v1/templates", {"body": _raw(nan_template), "media_type": "application/json"}, "admin", 422),
        # the trust boundary: what a member may not change, what nobody may set
        (*post_job, {"body": {"template": "mwms-demo", "overrides": {"container": {"command": ["sh", "-c", "id"]}}}},
         "member", 403),
        (*post_job, {"body": {"template": "mwms-demo", "overrides": {"container": {"env": {"LD_PRELOAD": "/x.so"}}}}},
         "member", 403),
        (*post_job, {"body": {"template": "mwms-demo",
                              "overrides": {"service_account": "owner@p.iam.gserviceaccount.com"}}}, "member", 403),
        (*post_job, {"body": {"template": "mwms-demo", "overrides": {"container": {"env": {"AIP_MODEL_DIR": "/"}}}}},
         "admin", 422),
        ("POST", "/v1/templates", {"body": {"name": "badpath", "spec": {"container": {"image_uri": "x"},
                                                                     "overridable": ["workers.nope"]}}}, "admin", 422),
        # a flood of problems is answered with a bounded list
        (*post_job, {"body": {"template": "mwms-demo", "overrides": {f"k{i}": i for i in range(5000)}}}, "admin", 422),
        (*post_job, {"body": {"template": "mwms-demo",
                              "overrides": {"container": {"env": {f"K{i}": "v" for i in range(5000)}}}}}, "member", 403),
    ]


def test_explicit_hostile_inputs_get_their_4xx(live_server, demo_live, tokens):
    schema = schemathesis.openapi.from_url(f"{live_server}/openapi.json", timeout=60)  # a busy 2-core host took >10 s once
    job = httpx.post(f"{live_server}/v1/jobs", json={"template": "mwms-demo"}, headers=bearer(tokens["admin"]))
    assert job.status_code == 201, job.text
    results = []
    for method, path, case_args, role, expected in explicit_examples(job.json()["id"]):
        case = schema[path][method].Case(**case_args)
        case.headers = {**(case.headers or {}), **bearer(tokens[role])}
        response = case.call_and_validate(base_url=live_server, checks=CHECKS, timeout=30)
        results.append((method, path, response.status_code))
        assert response.status_code == expected, (method, path, case_args, response.text[:500])
        if response.status_code in (403, 422):
            assert len(response.json().get("errors") or []) <= 50
    print(results)
