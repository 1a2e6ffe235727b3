"""POST /v1/jobs and GET /v1/jobs/{id} each have one path (issue 24): the route FastAPI
declares is the handler, so everything declared on it (its dependencies, their overrides,
its parameters and body) applies to every request, and its OpenAPI operation is what it
always was (openapi_jobs_snapshot.json, taken before the two-path scheme was removed)."""
import json
import os
import uuid
from pathlib import Path

import pytest
from fastapi import APIRouter, Depends
from fastapi.routing import APIRoute

from service import app as app_module
from service.auth.service import hash_token, resolve
from service.core.errors import Forbidden
from service.jobs.router import router as jobs_router
from tests.apikit import assert_problem
from tests.conftest import bearer, make_token

JOB = {"template": "mwms-demo", "parameters": {"epochs": 2}, "labels": {"team-run": "a"}}
VOLATILE = {"id", "display_name", "created_at", "updated_at", "attempts", "custom_job", "cluster"}
SNAPSHOT = Path(__file__).with_name("openapi_jobs_snapshot.json")


def _stable(job: dict) -> dict:
    """What two jobs of the same request share: the job's own id (in its folders) made neutral."""
    kept = {k: v for k, v in job.items() if k not in VOLATILE}
    return json.loads(json.dumps(kept).replace(job["id"], "<job id>"))


def test_the_job_routes_are_plain_routes(client):
    """No route class of our own: FastAPI's handler (dependencies, then the endpoint) is the only one."""
    jobs = [r for r in client.app.routes if getattr(r, "path", "").startswith("/v1/jobs")]
    assert {(r.path, m) for r in jobs for m in r.methods} >= {("/v1/jobs", "POST"), ("/v1/jobs/{job_id}", "GET")}
    assert all(type(r) is APIRoute for r in jobs), [type(r) for r in jobs if type(r) is not APIRoute]


def test_the_openapi_operations_are_as_they_were(client):
    """A deliberate change of these operations: rerun this test with TJ_UPDATE_OPENAPI_SNAPSHOT=1
    (it rewrites the snapshot from the app), then review and commit the diff."""
    snapshot = json.loads(SNAPSHOT.read_text())
    doc = client.app.openapi()
    if os.environ.get("TJ_UPDATE_OPENAPI_SNAPSHOT"):
        snapshot = {"paths": {path: {method: doc["paths"][path][method] for method in operations}
                              for path, operations in snapshot["paths"].items()},
                    "securitySchemes": doc["components"]["securitySchemes"]}
        SNAPSHOT.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    assert doc["components"]["securitySchemes"] == snapshot["securitySchemes"]
    for path, operations in snapshot["paths"].items():
        for method, operation in operations.items():
            assert doc["paths"][path][method] == operation, (method, path)


@pytest.fixture
def refusing_app(api_client, settings, tokens, monkeypatch):
    """The app with one more dependency on POST /v1/jobs, one that refuses: the route rebuilt as
    declared (its class, endpoint and options) plus that dependency, as a later change would add it."""
    refused: list[int] = []

    async def refuse() -> None:
        refused.append(1)
        raise Forbidden("submits are closed")
    rebuilt = APIRouter()
    for r in jobs_router.routes:
        if isinstance(r, APIRoute) and r.path == "/v1/jobs" and "POST" in r.methods:
            r = type(r)(r.path, r.endpoint, methods=list(r.methods), status_code=r.status_code,
                        response_model=r.response_model, responses=r.responses, name=r.name,
                        operation_id=r.operation_id, dependencies=[*r.dependencies, Depends(refuse)])
        rebuilt.routes.append(r)
    monkeypatch.setattr(app_module, "jobs_router", rebuilt)
    with api_client(settings, tokens["admin"]) as c:
        yield c, refused


def test_a_dependency_added_to_the_route_applies_to_every_submit(refusing_app, tokens):
    """With a cached token too: the old lean path served those without the route's dependencies."""
    client, refused = refusing_app
    member = bearer(tokens["member"])
    client.app.state.services.token_cache.put(hash_token(tokens["member"]), _actor_of(client, tokens["member"]))
    assert_problem(client.post("/v1/jobs", json=JOB, headers=member), 403)
    assert_problem(client.post("/v1/jobs", json=JOB, headers={**member, "Idempotency-Key": "k"}), 403)
    assert len(refused) == 2


def _actor_of(client, secret: str):
    with client.app.state.services.session_factory() as session:
        return resolve(session, secret)


def test_a_plain_submit_answers_like_one_with_a_query_string(client, demo):
    first = client.post("/v1/jobs", json=JOB)       # the token is not cached yet
    assert first.status_code == 201, first.text
    plain = client.post("/v1/jobs", json=JOB)
    assert plain.status_code == 201, plain.text
    queried = client.post("/v1/jobs?dry_run=false", json=JOB)
    assert queried.status_code == 201
    assert _stable(first.json()) == _stable(plain.json()) == _stable(queried.json())
    assert plain.headers["location"] == f"/v1/jobs/{plain.json()['id']}"
    assert len(plain.json()["cluster"]) == len(queried.json()["cluster"])
    stored = client.get(f"/v1/jobs/{plain.json()['id']}").json()
    assert stored["state"] == "QUEUED" and stored["parameters"] == {"epochs": 2}


def test_a_submit_keeps_idempotency(client, demo):
    client.post("/v1/jobs", json=JOB)                # caches the token
    key = {"Idempotency-Key": "run-42"}
    one = client.post("/v1/jobs", json=JOB, headers=key)
    two = client.post("/v1/jobs", json=JOB, headers=key)
    assert (one.status_code, two.status_code) == (201, 201)
    assert one.json()["id"] == two.json()["id"] and two.headers["idempotent-replayed"] == "true"
    other = client.post("/v1/jobs", json={**JOB, "parameters": {"epochs": 3}}, headers=key)
    assert_problem(other, 409)


@pytest.mark.parametrize("change, field", [
    ({"json": {**JOB, "surprise": 1}}, "surprise"),                       # the body does not validate
    ({"json": {**JOB, "parameters": {"epochs": [1]}}}, "parameters.epochs"),
    ({"json": JOB, "headers": {"Idempotency-Key": "has space"}}, "idempotency-key"),
])
def test_bad_input_gets_the_declared_422(client, demo, change, field):
    client.post("/v1/jobs", json=JOB)                # caches the token
    body = assert_problem(client.post("/v1/jobs", **change), 422)
    assert any(field.split(".")[0] in e["field"] for e in body["errors"]), body


def test_a_viewer_token_in_the_cache_is_still_refused(client, demo, tokens):
    viewer = bearer(tokens["viewer"])
    assert_problem(client.post("/v1/jobs", json=JOB, headers=viewer), 403)   # read from the database, cached
    assert hash_token(tokens["viewer"]) in client.app.state.services.token_cache._items
    assert_problem(client.post("/v1/jobs", json=JOB, headers=viewer), 403)   # from the cache


def test_a_token_revoked_after_it_was_cached_is_refused_and_forgotten(client, demo, tokens):
    member = bearer(tokens["member"])
    assert client.post("/v1/jobs", json=JOB, headers=member).status_code == 201   # cached now
    cache = client.app.state.services.token_cache
    assert cache.get(hash_token(tokens["member"])) is not None
    token_id = next(t["id"] for t in client.get("/v1/tokens").json() if t["role"] == "member")
    assert client.post(f"/v1/tokens/{token_id}/revoke").status_code == 200
    before = client.get("/v1/jobs?limit=200").json()["items"]
    assert_problem(client.post("/v1/jobs", json=JOB, headers=member), 401)   # met in the submit's query
    assert client.get("/v1/jobs?limit=200").json()["items"] == before       # nothing stored for it
    assert cache.get(hash_token(tokens["member"])) is None                  # and forgotten
    assert_problem(client.post("/v1/jobs", json=JOB, headers=member), 401)   # now from the database


def test_a_job_is_shown_alike_with_or_without_a_query_string(client, demo):
    job = client.post("/v1/jobs", json=JOB).json()
    plain = client.get(f"/v1/jobs/{job['id']}")
    queried = client.get(f"/v1/jobs/{job['id']}?via=query")
    assert (plain.status_code, queried.status_code) == (200, 200)
    assert plain.json() == queried.json()
    assert plain.json()["id"] == job["id"] and plain.json()["cluster"] == job["cluster"]


def test_the_job_view_refuses_what_it_must(client, demo, tokens, db_url):
    job = client.post("/v1/jobs", json=JOB).json()
    assert_problem(client.get("/v1/jobs/not-a-uuid"), 422)
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers={"Authorization": ""}), 401)
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=bearer("tj_unknown")), 401)
    other_team = bearer(make_token(db_url, "beta", "viewer"))
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=other_team), 404)   # not theirs to see
    assert_problem(client.get(f"/v1/jobs/{uuid.uuid4()}"), 404)
    viewer = bearer(tokens["viewer"])
    assert client.get(f"/v1/jobs/{job['id']}", headers=viewer).status_code == 200
    token_id = next(t["id"] for t in client.get("/v1/tokens").json() if t["role"] == "viewer")
    assert client.post(f"/v1/tokens/{token_id}/revoke").status_code == 200
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=viewer), 401)   # revoked: refused at once
