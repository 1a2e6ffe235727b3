"""POST /v1/jobs and GET /v1/jobs/{id} have two paths (service/web/lean_route.py,
service/jobs/lean_paths.py): the lean one for plain requests, the declared FastAPI one for
everything else. They must give the same answers; the lean one must hand every doubtful
request to the declared one."""
import json
import uuid

import pytest

from service.jobs import lean_paths
from tests.apikit import assert_problem
from tests.conftest import bearer, make_token

JOB = {"template": "mwms-demo", "parameters": {"epochs": 2}, "labels": {"team-run": "a"}}
VOLATILE = {"id", "display_name", "created_at", "updated_at", "attempts", "custom_job", "cluster"}


def _counting(monkeypatch, name: str) -> list:
    """The calls of lean_paths.<name>: how many requests the lean path served."""
    calls = []
    real = getattr(lean_paths, name)

    def counting(*args):
        calls.append(args)
        return real(*args)
    monkeypatch.setattr(lean_paths, name, counting)
    return calls


@pytest.fixture
def lean_calls(monkeypatch):
    """How many submits the lean path served."""
    return _counting(monkeypatch, "_submit_work")


def _stable(job: dict) -> dict:
    """What two jobs of the same request share: the job's own id (in its folders) made neutral."""
    kept = {k: v for k, v in job.items() if k not in VOLATILE}
    return json.loads(json.dumps(kept).replace(job["id"], "<job id>"))


def test_a_plain_submit_takes_the_lean_path_and_answers_like_the_declared_one(client, demo, lean_calls):
    first = client.post("/v1/jobs", json=JOB)       # the token is not cached yet: declared path
    assert first.status_code == 201, first.text
    assert lean_calls == []
    lean = client.post("/v1/jobs", json=JOB)
    assert lean.status_code == 201, lean.text
    assert len(lean_calls) == 1
    declared = client.post("/v1/jobs?dry_run=false", json=JOB)   # a query string: declared path
    assert declared.status_code == 201 and len(lean_calls) == 1
    assert _stable(lean.json()) == _stable(declared.json())
    assert lean.headers["location"] == f"/v1/jobs/{lean.json()['id']}"
    assert len(lean.json()["cluster"]) == len(declared.json()["cluster"])
    stored = client.get(f"/v1/jobs/{lean.json()['id']}").json()
    assert stored["state"] == "QUEUED" and stored["parameters"] == {"epochs": 2}


def test_the_lean_path_keeps_idempotency(client, demo, lean_calls):
    client.post("/v1/jobs", json=JOB)                # caches the token
    key = {"Idempotency-Key": "run-42"}
    one = client.post("/v1/jobs", json=JOB, headers=key)
    two = client.post("/v1/jobs", json=JOB, headers=key)
    assert len(lean_calls) == 2
    assert (one.status_code, two.status_code) == (201, 201)
    assert one.json()["id"] == two.json()["id"] and two.headers["idempotent-replayed"] == "true"
    other = client.post("/v1/jobs", json={**JOB, "parameters": {"epochs": 3}}, headers=key)
    assert_problem(other, 409)


@pytest.mark.parametrize("change, field", [
    ({"json": {**JOB, "surprise": 1}}, "surprise"),                       # the body does not validate
    ({"json": {**JOB, "parameters": {"epochs": [1]}}}, "parameters.epochs"),
    ({"json": JOB, "headers": {"Idempotency-Key": "has space"}}, "idempotency-key"),
])
def test_what_the_lean_path_doubts_gets_the_declared_paths_422(client, demo, lean_calls, change, field):
    client.post("/v1/jobs", json=JOB)                # caches the token
    body = assert_problem(client.post("/v1/jobs", **change), 422)
    assert any(field.split(".")[0] in e["field"] for e in body["errors"]), body
    assert lean_calls == []


def test_a_viewer_token_in_the_cache_is_still_refused(client, demo, tokens, lean_calls):
    viewer = bearer(tokens["viewer"])
    assert client.get("/v1/jobs", headers=viewer).status_code == 200   # the viewer's token is cached now
    assert_problem(client.post("/v1/jobs", json=JOB, headers=viewer), 403)
    assert lean_calls == []


def test_a_token_revoked_after_it_was_cached_is_refused_by_the_lean_path(client, demo, tokens, lean_calls):
    member = bearer(tokens["member"])
    assert client.post("/v1/jobs", json=JOB, headers=member).status_code == 201   # cached now
    token_id = next(t["id"] for t in client.get("/v1/tokens").json() if t["role"] == "member")
    assert client.post(f"/v1/tokens/{token_id}/revoke").status_code == 200
    before = client.get("/v1/jobs?limit=200").json()["items"]
    assert_problem(client.post("/v1/jobs", json=JOB, headers=member), 401)
    assert len(lean_calls) == 1                      # the lean path met the revocation, in its query
    assert client.get("/v1/jobs?limit=200").json()["items"] == before   # nothing stored for it
    assert_problem(client.post("/v1/jobs", json=JOB, headers=member), 401)
    assert len(lean_calls) == 1                      # and forgot the token: the declared path answers now


@pytest.fixture
def lean_views(monkeypatch):
    """How many GET /v1/jobs/{id} the lean path served."""
    return _counting(monkeypatch, "_view_work")


def test_a_job_is_shown_alike_on_both_paths(client, demo, lean_views):
    job = client.post("/v1/jobs", json=JOB).json()
    lean = client.get(f"/v1/jobs/{job['id']}")
    declared = client.get(f"/v1/jobs/{job['id']}?via=declared")   # a query string: the declared path
    assert (lean.status_code, declared.status_code) == (200, 200)
    assert len(lean_views) == 1
    assert lean.json() == declared.json()
    assert lean.json()["id"] == job["id"] and lean.json()["cluster"] == job["cluster"]


def test_the_lean_view_refuses_what_the_declared_one_refuses(client, demo, tokens, lean_views, db_url):
    job = client.post("/v1/jobs", json=JOB).json()
    assert_problem(client.get("/v1/jobs/not-a-uuid"), 422)              # declared: the parameter's 422
    assert len(lean_views) == 0
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers={"Authorization": ""}), 401)   # declared
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=bearer("tj_unknown")), 401)    # lean: no such token
    other_team = bearer(make_token(db_url, "beta", "viewer"))
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=other_team), 404)   # not theirs to see
    assert_problem(client.get(f"/v1/jobs/{uuid.uuid4()}"), 404)
    assert len(lean_views) == 3
    viewer = bearer(tokens["viewer"])
    assert client.get(f"/v1/jobs/{job['id']}", headers=viewer).status_code == 200
    token_id = next(t["id"] for t in client.get("/v1/tokens").json() if t["role"] == "viewer")
    assert client.post(f"/v1/tokens/{token_id}/revoke").status_code == 200
    assert_problem(client.get(f"/v1/jobs/{job['id']}", headers=viewer), 401)   # revoked: refused at once
