"""Every problem `type` resolves to a page of this service (/problems/{slug}), for the
problems the app answers and those the middlewares and the request-head limits answer
before it runs; and every type the code can emit has a page."""
import ast
import socket
from pathlib import Path
from urllib.parse import urljoin, urlparse

import httpx
import pytest

from service.web.problem_types import HTTP_SLUGS, TYPES
from tests.apikit import DEMO, assert_problem
from tests.conftest import ONE_DATABASE, bearer

pytestmark = ONE_DATABASE

SERVICE = Path(__file__).resolve().parents[2] / "service"


def emitted_slugs() -> set[str]:
    """Every slug in the source: `slug = ...` (the domain errors' class attributes, the
    middlewares' choices) and the slug argument of problem(...) and _answer(...)."""
    found: set[str] = set()
    for path in SERVICE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    if len(values) != len(names):
                        values = [node.value] * len(names)
                    for name, value in zip(names, values, strict=True):
                        if isinstance(name, ast.Name) and name.id == "slug":
                            found |= {c.value for c in ast.walk(value)
                                      if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            elif isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                at = {"problem": 3, "_answer": 3}.get(func)  # problem(status, title, detail, slug, ...)
                if at is not None and len(node.args) > at and isinstance(node.args[at], ast.Constant):
                    found.add(node.args[at].value)
    return found


def test_every_slug_the_code_emits_has_a_page_entry():
    slugs = emitted_slugs()
    # The scan finds the kinds it must (or it scans nothing and proves nothing).
    assert {"not-found", "invalid", "invalid-request", "overloaded", "body-too-large", "headers-too-large",
            "request-timeout", "limit-exceeded", "stale-form", "logs-budget-spent", "internal"} <= slugs
    assert slugs | set(HTTP_SLUGS.values()) <= set(TYPES), slugs - set(TYPES)


def test_every_type_page_answers(client):
    index = client.get("/problems")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    for slug, kind in TYPES.items():
        r = client.get(f"/problems/{slug}")
        assert r.status_code == 200, slug
        assert kind.title in r.text and f"/problems/{slug}" in r.text
        assert f'href="/problems/{slug}"' in index.text
        assert r.headers["x-frame-options"] == "DENY" or "frame-ancestors 'none'" in r.headers[
            "content-security-policy"]
    unknown = assert_problem(client.get("/problems/no-such-kind"), 404)
    assert unknown["type"] == "/problems/not-found"


def resolves(client_or_url, answer: httpx.Response) -> str:
    """The type, resolved against the answer's URL, fetched: 200 or the test fails."""
    body = answer.json()
    uri = urljoin(str(answer.request.url), body["type"])
    assert urlparse(uri).netloc == urlparse(str(answer.request.url)).netloc, uri  # on this service, not elsewhere
    page = httpx.get(uri, timeout=10) if isinstance(client_or_url, str) else client_or_url.get(uri)
    assert page.status_code == 200, (uri, page.text[:300])
    assert body["title"] in page.text or TYPES[body["type"].rsplit("/", 1)[1]].title in page.text
    return body["type"].rsplit("/", 1)[1]


def test_each_problem_the_app_answers_has_a_type_that_resolves(client, tokens, demo):
    anonymous = {"Authorization": ""}
    viewer = bearer(tokens["viewer"])
    answers = [
        client.get("/v1/jobs", headers=anonymous),                                       # 401
        client.post("/v1/templates", json=DEMO | {"name": "other"}, headers=viewer),       # 403
        client.get("/v1/jobs/00000000-0000-0000-0000-000000000000"),                     # 404 domain
        client.get("/nowhere"),                                                          # 404 no route
        client.post("/jobs", json={"template": "mwms-demo"}),                            # 404 unversioned
        client.delete("/v1/jobs"),                                                       # 405
        client.post("/v1/templates", json=DEMO),                                         # 409
        client.post("/v1/jobs", content=b"{", headers={"content-type": "application/json"}),  # 422 schema
        client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 0}}),  # 422 domain
        client.post("/v1/jobs", content=b"x" * (2 << 20), headers={"content-type": "application/json"}),  # 413
    ]
    statuses = [a.status_code for a in answers]
    assert statuses == [401, 403, 404, 404, 404, 405, 409, 422, 422, 413], [a.text for a in answers]
    kinds = {resolves(client, a) for a in answers}
    assert {"unauthorized", "forbidden", "not-found", "unversioned-path", "method-not-allowed", "conflict",
            "invalid-request", "invalid", "body-too-large"} <= kinds


@pytest.fixture
def settings(settings):
    settings.http_max_header_bytes = 8192
    return settings


def test_a_problem_answered_before_the_app_runs_resolves_too(live_server):
    """The request-head limit (service/web/protocol.py) answers on the raw socket."""
    u = urlparse(live_server)
    with socket.create_connection((u.hostname, u.port), timeout=20) as s:
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 9000}\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    import json
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    page = httpx.get(urljoin(live_server + "/healthz", body["type"]), timeout=10)
    assert page.status_code == 200 and "431" in page.text
