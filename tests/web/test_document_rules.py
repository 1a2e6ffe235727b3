"""Rules the service enforced but the OpenAPI document did not state, and inputs the service
took although the document refused them (issue 36; the schemathesis run of
test_openapi_conformance.py finds such mismatches at random, these pin each one)."""
from __future__ import annotations

import pytest

from service.core.pagination import encode_cursor
from tests.apikit import assert_problem

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_a_cursor_outside_base64url_is_refused_not_read_as_another(client, demo):
    """The decoder skips characters outside its alphabet: `ab!c` was read as `abc`."""
    for _ in range(3):
        assert client.post("/v1/jobs", json={"template": "mwms-demo"}).status_code == 201
    page = client.get("/v1/jobs", params={"limit": 1}).json()
    cursor = page["next_cursor"]
    assert client.get("/v1/jobs", params={"limit": 1, "cursor": cursor}).status_code == 200
    body = assert_problem(client.get("/v1/jobs", params={"limit": 1, "cursor": cursor[:4] + "!" + cursor[4:]}),
                          422, "cursor")
    assert "unchanged" in body["errors"][0]["fix"]
    assert_problem(client.get("/v1/templates", params={"cursor": encode_cursor("x") + "="}), 422, "cursor")


def test_times_are_rfc3339_not_unix_seconds(client):
    assert_problem(client.get("/v1/jobs", params={"created_after": "0.5"}), 422)
    assert_problem(client.get("/v1/jobs", params={"created_before": "2026-01-01"}), 422)
    assert client.get("/v1/jobs", params={"created_after": "2026-01-01T00:00:00Z"}).status_code == 200


def test_a_spend_is_digits_with_six_decimals_at_most(client):
    for bad in ("1e3", " 5", "+5", "5.1234567", 5.1234567):
        assert_problem(client.put("/v1/teams/alpha/limits", json={"max_monthly_spend": bad}), 422, "max_monthly_spend")
    for good in ("2500.00", "0", 12.5, 7):
        r = client.put("/v1/teams/alpha/limits", json={"max_monthly_spend": good})
        assert r.status_code == 200, (good, r.text)


def test_the_document_states_the_rules(client):
    schemas = client.app.openapi()["components"]["schemas"]
    job = schemas["JobCreate"]["properties"]
    assert job["backend"]["anyOf"][0]["enum"] == ["local"]  # this app's backends
    name = job["display_name"]["anyOf"][0]
    assert (name["minLength"], name["maxLength"]) == (1, 128) and name["pattern"].startswith("^[^\\u0000-")
    assert schemas["WebhookCreate"]["properties"]["event_types"]["uniqueItems"] is True
    assert schemas["LimitsIn"]["properties"]["max_accelerators"]["additionalProperties"] is False
    assert schemas["SweepCreate"]["properties"]["seed"]["anyOf"][0]["maximum"] == 2**53 - 1
    listing = {p["name"]: p for p in client.app.openapi()["paths"]["/v1/jobs"]["get"]["parameters"]}
    assert listing["cursor"]["schema"]["pattern"] == "^[A-Za-z0-9_-]*$"


def test_every_operation_documents_the_answers_before_its_route(client):
    for path, item in client.app.openapi()["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            assert {"408", "431"} <= codes, (method, path)
            if "requestBody" in op:
                assert {"400", "413"} <= codes, (method, path)
            if path.startswith("/v1"):
                assert "Retry-After" in op["responses"]["503"]["headers"], (method, path)
