"""Every bad input is a 4xx problem, on SQLite and PostgreSQL: integers past what
the database stores, timestamps outside years 1-9999 in UTC (also inside forged
cursors), NaN and Infinity, chunked bodies over the limit, floods of problems."""
import copy
import json
import uuid

import pytest

from service.core.pagination import encode_cursor
from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer


def raw_post(client, path, text, headers=None):
    return client.post(path, content=text.encode(), headers={"content-type": "application/json", **(headers or {})})


@pytest.mark.parametrize("version", [2**31, 2**63, 2**64 + 1, 10**30])
def test_versions_beyond_the_database_integer_are_422(client, demo, version):
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "template_version": version}), 422,
                   "template_version")
    assert_problem(client.get("/v1/templates/mwms-demo", params={"version": version}), 422, "query.version")


def test_the_largest_version_is_a_plain_404(client, demo):
    body = assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "template_version": 2**31 - 1}), 404)
    assert "versions are 1 to 1" in body["detail"]
    assert_problem(client.get("/v1/templates/mwms-demo", params={"version": 2**31 - 1}), 404)


@pytest.mark.parametrize("param,value", [
    ("created_after", "0001-01-01T00:00:00+14:00"),
    ("created_before", "9999-12-31T23:59:59-14:00"),
    ("created_after", "9999-12-31T23:59:59.999999-00:01"),
])
def test_timestamps_outside_what_the_databases_store_are_422(client, demo, param, value):
    body = assert_problem(client.get("/v1/jobs", params={param: value}), 422, param)
    assert "0001-01-01T00:00:00Z" in body["errors"][0]["fix"]


def test_the_extremes_that_are_storable_work(client, demo):
    job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
    ids = lambda **p: [j["id"] for j in client.get("/v1/jobs", params=p).json()["items"]]  # noqa: E731
    assert ids(created_after="0001-01-01T00:00:00Z") == [job["id"]]
    assert ids(created_before="9999-12-31T23:59:59.999999Z") == [job["id"]]
    assert ids(created_after="9999-12-31T23:59:59Z") == []
    assert ids(created_before="0001-01-01T00:00:00-14:00") == []


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-01-01T00:00:00",
                                "not a time", "2026-13-01T00:00:00Z"])
def test_forged_job_cursors_are_422(client, demo, at):
    assert_problem(client.get("/v1/jobs", params={"cursor": encode_cursor(at, uuid.uuid4())}), 422, "cursor")
    assert_problem(client.get("/v1/jobs", params={"cursor": encode_cursor(at, "not-a-uuid")}), 422, "cursor")


@pytest.mark.parametrize("cursor", [encode_cursor("a\x00b"), encode_cursor("Zebra"), encode_cursor("x" * 200),
                                    "!!!!", "e30"])
def test_forged_template_cursors_are_422(client, demo, cursor):
    assert_problem(client.get("/v1/templates", params={"cursor": cursor}), 422, "cursor")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_nan_and_infinity_are_refused_in_parameters_and_overrides(client, demo, literal):
    r = raw_post(client, "/v1/jobs", f'{{"template": "mwms-demo", "parameters": {{"learning_rate": {literal}}}}}')
    body = assert_problem(r, 422)
    assert "parameters.learning_rate" in body["detail"] and "finite" in body["detail"]
    r = raw_post(client, "/v1/jobs", f'{{"template": "mwms-demo", "overrides": {{"anything": [1, {{"x": {literal}}}]}}}}')
    assert "overrides.anything[1].x" in assert_problem(r, 422)["detail"]
    assert client.get("/v1/jobs").json()["items"] == []


@pytest.mark.parametrize("where", ["default", "minimum", "maximum", "choices"])
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e999"])
def test_nan_and_infinity_are_refused_anywhere_in_a_template(client, where, literal):
    param = {"name": "lr", "type": "float", "default": 0.1}
    param[where] = "__X__" if where != "choices" else [0.1, "__X__"]
    body = copy.deepcopy(DEMO)
    body["name"] = "nan"
    body["parameters"] = [param]
    body["spec"]["container"]["args"] = ["--lr=${lr}"]
    text = json.dumps(body).replace('"__X__"', literal)
    detail = assert_problem(raw_post(client, "/v1/templates", text), 422)["detail"]
    assert "parameters[0]" in detail and "finite" in detail
    assert client.get("/v1/templates").json()["items"] == []
    # Anywhere else in the spec too, e.g. where an integer goes.
    text = json.dumps({**DEMO, "name": "nan2"}).replace('"replica_count": 1', f'"replica_count": {literal}', 1)
    assert_problem(raw_post(client, "/v1/templates", text), 422)


def test_huge_numbers_for_a_float_parameter_are_422(client, demo):
    big = "1" + "0" * 400  # a valid JSON integer no float can hold
    r = raw_post(client, "/v1/jobs", f'{{"template": "mwms-demo", "parameters": {{"learning_rate": {big}}}}}')
    assert_problem(r, 422, "parameters.learning_rate")
    r = raw_post(client, "/v1/jobs", f'{{"template": "mwms-demo", "parameters": {{"epochs": {big}}}}}')
    assert_problem(r, 422, "parameters.epochs")


def test_a_parameter_that_makes_an_argument_too_long_is_422(client):
    body = copy.deepcopy(DEMO)
    body.update(name="longarg", parameters=[{"name": "s", "type": "string", "default": "x"}])
    body["spec"]["container"]["args"] = ["--name=${s}"]
    assert client.post("/v1/templates", json=body).status_code == 201
    r = client.post("/v1/jobs", json={"template": "longarg", "parameters": {"s": "y" * 4096}})
    assert_problem(r, 422, "spec.container.args.0")


def test_a_422_lists_a_bounded_number_of_problems(client, demo):
    keys = {f"unknown_key_{i}_{'k' * 6}": i for i in range(30_000)}  # about 1 MB of unknown override keys
    text = json.dumps({"template": "mwms-demo", "overrides": keys})
    assert 900_000 < len(text) < 1_048_576
    r = raw_post(client, "/v1/jobs", text)
    body = assert_problem(r, 422)
    assert len(body["errors"]) == 50 and body["errors_omitted"] == 30_000 - 50
    assert "(and 29999 more)" in body["detail"]
    assert len(r.content) < 32 * 1024
    # A field named by a hostile key of any length is cut short.
    r = client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": {"k" * 500_000: 1}})
    body = assert_problem(r, 422)
    assert len(body["errors"][0]["field"]) <= 256 and len(body["detail"]) <= 2000 and len(r.content) < 8192


def test_the_problem_limit_is_a_setting(api_client, settings, tokens):

    settings.max_problems = 3
    with api_client(settings, tokens["admin"]) as client:
        client.post("/v1/templates", json=DEMO)
        r = client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": {f"k{i}": 1 for i in range(10)}})
        body = assert_problem(r, 422)
        assert len(body["errors"]) == 3 and body["errors_omitted"] == 7
        r = client.post("/v1/jobs", json={"template": "mwms-demo", "colour": 1, "shade": 2, "hue": 3, "tint": 4})
        body = assert_problem(r, 422)  # FastAPI's own validation errors too
        assert len(body["errors"]) == 3 and body["errors_omitted"] == 1


def chunks(total: int, size: int = 64 * 1024):
    sent = 0
    yield b'{"template": "mwms-demo", "display_name": "'
    while sent < total:
        n = min(size, total - sent)
        yield b"x" * n
        sent += n
    yield b'"}'


def test_a_chunked_body_over_the_limit_is_413(client, demo):
    r = client.post("/v1/jobs", content=chunks(2_000_000), headers={"content-type": "application/json"})
    body = assert_problem(r, 413)
    assert "limited to 1048576 bytes" in body["detail"]
    assert client.get("/v1/jobs").json()["items"] == []


def test_a_chunked_body_under_the_limit_is_read_whole(client, demo):
    def small():
        yield b'{"template": "mwms-'
        yield b'demo", "display_name": "chunked"}'
    r = client.post("/v1/jobs", content=small(), headers={"content-type": "application/json"})
    assert r.status_code == 201, r.text
    assert r.json()["display_name"] == "chunked"


def test_metrics_show_job_counts_only_with_the_metrics_token(api_client, settings, tokens):
    from pydantic import SecretStr

    settings.metrics_token = SecretStr("scrape-secret")
    with api_client(settings) as anon:
        anon.post("/v1/templates", json=DEMO, headers=bearer(tokens["admin"]))
        anon.post("/v1/jobs", json={"template": "mwms-demo"}, headers=bearer(tokens["admin"]))
        for headers in ({}, bearer(tokens["admin"]), bearer("scrape-secre"), {"Authorization": "Basic x"}):
            text = anon.get("/metrics", headers=headers).text
            assert "trainjobs_http_requests_total" in text and "trainjobs_jobs" not in text, headers
        text = anon.get("/metrics", headers=bearer("scrape-secret")).text
        assert 'trainjobs_jobs{backend="local",state="QUEUED"} 1.0' in text


def test_metrics_without_a_token_setting_never_show_job_counts(client, demo):
    client.post("/v1/jobs", json={"template": "mwms-demo"})
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer"}):
        text = client.get("/metrics", headers=headers).text
        assert "trainjobs_reconcile_ticks_total" in text and "trainjobs_jobs" not in text


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/templates", "/v1/jobs?dry_run=true"])
def test_a_body_nested_deeper_than_json_can_read_says_so(client, demo, path):
    # Python's JSON parser stops with a RecursionError: FastAPI's answer (and the submit's own
    # reading, service/jobs/submit_input.py) is a 400, whose words must say what is wrong.
    for deep in ("[" * 100_000 + "]" * 100_000, '{"template": ' + '{"a": ' * 50_000 + "1" + "}" * 50_001):
        body = assert_problem(raw_post(client, path, deep), 400)
        assert "nested too deeply" in body["detail"], body
    # Text that is not UTF-8 keeps its own words.
    r = client.post(path, content=b'{"template": "\xff"}', headers={"content-type": "application/json"})
    assert "not JSON text" in assert_problem(r, 400)["detail"]
