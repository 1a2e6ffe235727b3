"""What an anonymous caller can learn or do with the ops and docs pages: no request
counts by route (which team submits how often), no pid, docs never framed and never
keeping a token in the browser."""
from __future__ import annotations

import base64
import hashlib
import re

from pydantic import SecretStr

from tests.apikit import DEMO
from tests.conftest import bearer


def test_anonymous_metrics_have_no_route_labels(api_client, settings, tokens):
    settings.metrics_token = SecretStr("scrape-secret")
    with api_client(settings) as c:
        c.post("/v1/templates", json=DEMO, headers=bearer(tokens["admin"]))
        c.post("/v1/tokens", json={"name": "x", "role": "viewer"}, headers=bearer(tokens["admin"]))
        c.request("BREW", "/v1/jobs")  # a made-up method is no new label value
        for headers in ({}, bearer(tokens["admin"]), bearer("scrape-secre")):
            text = c.get("/metrics", headers=headers).text
            assert "route=" not in text and "/v1/tokens" not in text, headers
            assert 'trainjobs_http_requests_total{method="POST",status="201"} 2.0' in text
            assert 'method="BREW"' not in text and 'method="OTHER"' in text
        private = c.get("/metrics", headers=bearer("scrape-secret")).text
        assert 'trainjobs_http_route_requests_total{method="POST",route="/v1/tokens",status="201"} 1.0' in private


def test_readyz_shows_no_pid_but_to_the_operator(api_client, settings):
    settings.metrics_token = SecretStr("scrape-secret")
    with api_client(settings) as c:
        body = c.get("/readyz").json()
        assert body["status"] == "ready" and "pid" not in body
        assert "pid" not in c.get("/readyz", headers=bearer("wrong")).json()
        assert isinstance(c.get("/readyz", headers=bearer("scrape-secret")).json()["pid"], int)


def test_docs_are_never_framed_and_keep_no_token(client):
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        r = client.get(path)
        assert r.status_code == 200
        assert r.headers["x-frame-options"] == "DENY", path
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, csp
        # Every inline script runs because the policy names its hash, and nothing else inline.
        script_src = re.search(r"script-src ([^;]+)", csp).group(1)
        assert "'unsafe-inline'" not in script_src
        for inline in re.findall(r"<script>(.*?)</script>", r.text, re.S):
            digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in script_src
        assert not re.search(r'(src|href)="(https?:)?//', r.text), path  # nothing from another host
    page = client.get("/docs").text
    assert '"persistAuthorization": false' in page and '"persistAuthorization": true' not in page
