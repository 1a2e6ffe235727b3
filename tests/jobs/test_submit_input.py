"""POST /v1/jobs reads its own input (service/jobs/submit_input.py) and must answer exactly as
FastAPI answers for the route's declaration: here that declaration runs as a real route beside
it (the signature POST /v1/jobs had, FastAPI's handling, the same work), and both get the same
requests, good and bad, in the same app. Their answers must be equal: status, type, every
field of a problem, the job."""
from __future__ import annotations

import json
import re
from typing import Annotated

import httpx
import pytest
from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.routing import APIRoute

from service import app as app_module
from service.auth.deps import CachedMember
from service.jobs import router as jobs_module
from service.jobs import submit_input
from service.jobs.schemas import JobCreate
from service.jobs.submitter import IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_KEY_PATTERN
from service.web.container import services
from service.web.request_threads import in_thread
from tests.apikit import DEMO
from tests.conftest import bearer

JOB = {"template": "mwms-demo", "parameters": {"epochs": 2}, "labels": {"run": "a"}}
DECLARED = "/v1/jobs-declared"
JOB_FIELDS_THAT_DIFFER = {"id", "display_name", "created_at", "updated_at", "attempts", "custom_job", "cluster",
                          "cost", "resources"}


async def declared(body: JobCreate, request: Request, auth: CachedMember,
                   dry_run: Annotated[bool, Query(description=submit_input.DRY_RUN_DOC)] = False,
                   idempotency_key: Annotated[str | None, Header(
                       max_length=IDEMPOTENCY_KEY_MAX_LENGTH, pattern=IDEMPOTENCY_KEY_PATTERN,
                       description=submit_input.IDEMPOTENCY_DOC)] = None) -> Response:
    """POST /v1/jobs as it was declared before it read its own input."""
    return await in_thread(request, jobs_module._create_in_unit, services(request), auth, body, idempotency_key,
                           dry_run)


@pytest.fixture
def both(api_client, settings, tokens, monkeypatch):
    rebuilt = APIRouter()
    rebuilt.routes.extend(jobs_module.router.routes)
    rebuilt.add_api_route(DECLARED, declared, methods=["POST"], status_code=201)
    monkeypatch.setattr(app_module, "jobs_router", rebuilt)
    with api_client(settings, tokens["admin"]) as c:
        assert c.post("/v1/templates", json=DEMO).status_code == 201
        yield c


def _answer(response) -> tuple:
    kind = response.headers.get("content-type")
    if not kind or "json" not in kind:
        return response.status_code, kind, response.text
    body = response.json()
    if isinstance(body, dict) and "id" in body and "state" in body:   # a job: what two submits share
        body = {k: v for k, v in body.items() if k not in JOB_FIELDS_THAT_DIFFER}
    elif isinstance(body, dict):
        body.pop("instance", None)   # the path asked
        body.pop("request_id", None)
    text = UUID.sub("<id>", json.dumps(body, sort_keys=True))   # each job, each preview, has its own
    return response.status_code, kind, text, response.headers.get("www-authenticate")


# A job's or a preview's id, and the default display name made from it (<template>-<short id>).
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<=mwms-demo-)[0-9a-f]{8}\b")
NO_TOKEN = {"Authorization": ""}
CASES = {
    "a job": dict(json=JOB),
    "a job, charset": dict(content=json.dumps(JOB), headers={"Content-Type": "application/json; charset=utf-8"}),
    "a job, +json": dict(content=json.dumps(JOB), headers={"Content-Type": "application/vnd.trainjobs+json"}),
    "a job, no Content-Type": dict(content=json.dumps(JOB), headers={"Content-Type": ""}),
    "a job, text/plain": dict(content=json.dumps(JOB), headers={"Content-Type": "text/plain"}),
    "a job, no token": dict(json=JOB, headers=NO_TOKEN),
    "a job, a bad token": dict(json=JOB, headers=bearer("tj_nope")),
    "a job, a viewer": dict(json=JOB, role="viewer"),
    "a dry run": dict(json=JOB, params={"dry_run": "true"}),
    "dry run 1": dict(json=JOB, params={"dry_run": "1"}),
    "dry run off": dict(json=JOB, params={"dry_run": "off"}),
    "dry run empty": dict(json=JOB, params={"dry_run": ""}),
    "dry run twice": dict(json=JOB, params=[("dry_run", "true"), ("dry_run", "false")]),
    "dry run bad": dict(json=JOB, params={"dry_run": "maybe"}),
    "another query": dict(json=JOB, params={"dryrun": "true"}),
    "a key": dict(json=JOB, headers={"Idempotency-Key": "k-{route}"}),
    "a key twice": dict(json=JOB, headers=[("Idempotency-Key", "a-{route}"), ("Idempotency-Key", "b c")]),
    "a key with a space": dict(json=JOB, headers={"Idempotency-Key": "has space"}),
    "a key too long": dict(json=JOB, headers={"Idempotency-Key": "k" * (IDEMPOTENCY_KEY_MAX_LENGTH + 1)}),
    "an empty key": dict(json=JOB, headers={"Idempotency-Key": ""}),
    "invalid JSON": dict(content=b'{"template": ', headers={"Content-Type": "application/json"}),
    "invalid JSON, no token": dict(content=b"{", headers={"Content-Type": "application/json", **NO_TOKEN}),
    "not UTF-8": dict(content=b'{"template": "\xff"}', headers={"Content-Type": "application/json"}),
    "no body": dict(content=b"", headers={"Content-Type": "application/json"}),
    "null": dict(content=b"null", headers={"Content-Type": "application/json"}),
    "a list": dict(json=[JOB]),
    "a string": dict(json="mwms-demo"),
    "an unknown field": dict(json={**JOB, "surprise": 1}),
    "a bad parameter": dict(json={**JOB, "parameters": {"epochs": [1]}}),
    "NaN": dict(content=b'{"template": "mwms-demo", "parameters": {"lr": NaN}}',
                headers={"Content-Type": "application/json"}),
    "a NUL": dict(json={**JOB, "display_name": "a\u0000b"}),
    "no template": dict(json={"parameters": {}}),
    "an unknown template": dict(json={"template": "nope"}),
    "a bad body, no token": dict(json={"surprise": 1}, headers=NO_TOKEN),
    "a bad body, a viewer": dict(json={"surprise": 1}, role="viewer"),
    "everything bad": dict(json={"surprise": 1, "template": 7}, params={"dry_run": "maybe"},
                           headers={"Idempotency-Key": "has space"}),
}


def _send(client, route: str, spec: dict, tokens: dict):
    """POST the case: its headers replace the client's (an empty Authorization or Content-Type
    is left out), repeated ones are sent repeated."""
    spec = dict(spec)
    role = spec.pop("role", "admin")
    headers = spec.pop("headers", {})
    pairs = [(k, v.replace("{route}", route.rsplit("/", 1)[1]))
             for k, v in (headers.items() if isinstance(headers, dict) else headers)]
    if role != "admin":
        pairs.append(("Authorization", bearer(tokens[role])["Authorization"]))
    request = client.build_request("POST", route, **spec)
    replaced = {k.lower() for k, _ in pairs}
    raw = [(k, v) for k, v in request.headers.raw if k.decode().lower() not in replaced]
    raw += [(k.encode(), v.encode()) for k, v in pairs if v or k.lower() not in ("authorization", "content-type")]
    request.headers = httpx.Headers(raw)
    return client.send(request)


def test_the_route_answers_as_its_declaration(both, tokens):
    # Every case in one app (an app's start costs more than the cases): the ones that differ are named.
    differ, statuses = {}, set()
    for case, spec in CASES.items():
        ours, theirs = (_answer(_send(both, route, spec, tokens)) for route in ("/v1/jobs", DECLARED))
        statuses.add(ours[0])
        if ours != theirs:
            differ[case] = (ours, theirs)
    assert not differ, differ
    assert statuses == {200, 201, 400, 401, 403, 404, 422}, statuses   # every kind of answer was compared


def test_the_declaration_is_the_routes_document(both):
    """Both routes documented alike: what FastAPI makes of the declaration is what the
    route's openapi_extra says, and JobCreate's schema is in the components."""
    doc = both.app.openapi()
    ours, theirs = doc["paths"]["/v1/jobs"]["post"], doc["paths"][DECLARED]["post"]
    for key in ("parameters", "requestBody", "security"):
        assert ours[key] == theirs[key], key
    assert doc["components"]["schemas"]["JobCreate"]["additionalProperties"] is False
    assert [type(r) for r in both.app.routes
            if getattr(r, "path", "") == "/v1/jobs" and "POST" in getattr(r, "methods", ())] == [APIRoute]


def test_content_types_are_remembered_within_a_bound(monkeypatch):
    """A client may send any number of distinct Content-Type values: the parsed answers kept
    stay bounded (the rest are parsed each time, as FastAPI does), and each answer is right."""
    monkeypatch.setattr(submit_input, "_JSON_TYPES", {})
    for i in range(submit_input._JSON_TYPES_MAX * 3):
        assert submit_input._is_json(f"application/x{i}+json; charset=utf-8") is True
        assert submit_input._is_json(f"text/x{i}") is False
    assert len(submit_input._JSON_TYPES) == submit_input._JSON_TYPES_MAX
    assert submit_input._is_json("application/json") is True and submit_input._is_json("application/jsonx") is False
