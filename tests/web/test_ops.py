import json
import logging

from pydantic import SecretStr

from service.core.logging_setup import JsonFormatter, request_id_var
from tests.apikit import DEMO, assert_problem


def test_request_ids_are_echoed_or_made(client):
    r = client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    made = client.get("/healthz").headers["x-request-id"]
    assert len(made) == 32
    # A hostile id is replaced, not echoed.
    assert client.get("/healthz", headers={"X-Request-ID": "a\tb" + "x" * 300}).headers["x-request-id"] != "a\tb"


def test_metrics_count_requests_and_jobs(api_client, settings, tokens):
    settings.metrics_token = SecretStr("scrape-secret")
    with api_client(settings, tokens["admin"]) as client:
        client.post("/v1/templates", json=DEMO)
        client.post("/v1/jobs", json={"template": "mwms-demo"})
        client.get("/v1/jobs/00000000-0000-0000-0000-000000000000")
        text = client.get("/metrics", headers={"Authorization": "Bearer scrape-secret"}).text
    assert 'trainjobs_http_route_requests_total{method="POST",route="/v1/jobs",status="201"} 1.0' in text
    assert 'route="/v1/jobs/{job_id}",status="404"' in text
    assert 'trainjobs_jobs{backend="local",state="QUEUED"} 1.0' in text
    assert "trainjobs_reconcile_ticks_total" in text


def test_reconciler_passes_are_counted(client, demo):
    client.app.state.services.controller.run_once()
    text = client.get("/metrics").text
    assert "trainjobs_reconcile_ticks_total 1.0" in text


def test_oversized_bodies_are_refused_before_parsing(client, demo):
    huge = {"template": "mwms-demo", "display_name": "x" * 2_000_000}
    body = assert_problem(client.post("/v1/jobs", json=huge), 413)
    assert "limited to 1048576 bytes" in body["detail"]


def test_json_logs_carry_the_request_id():
    token = request_id_var.set("rid-1")
    try:
        record = logging.LogRecord("trainjobs", logging.INFO, __file__, 1, "hello %s", ("x",), None)
        record.job_id = "j1"
        line = json.loads(JsonFormatter().format(record))
    finally:
        request_id_var.reset(token)
    assert line["msg"] == "hello x" and line["request_id"] == "rid-1" and line["job_id"] == "j1"
    assert line["level"] == "INFO"
