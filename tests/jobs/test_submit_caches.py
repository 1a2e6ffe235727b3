"""The lean submit path keeps parsed template versions per process (versions are
immutable). Whatever another process changes must hold from the next request on:
an archive or unarchive, a new version, a revoked token."""
import copy
import os
import subprocess
import sys

import pytest

from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer

JOB = {"template": "mwms-demo"}


def _version_body(workers: int) -> dict:
    body = copy.deepcopy(DEMO)
    del body["name"]
    body["spec"]["workers"]["replica_count"] = workers
    return body


def _workers(job: dict) -> int:
    return sum(1 for r in job["cluster"] if r["tf_role"] == "worker")


@pytest.fixture
def other(api_client, settings, tokens):
    """A second app on the same database: another process's API, with caches of its own."""
    with api_client(settings, tokens["admin"]) as c:
        yield c


@pytest.fixture
def anon_client(api_client, settings, tokens):
    """No token unless a request sends one."""
    with api_client(settings) as c:
        yield c


def test_an_archived_template_refuses_new_jobs_at_once(client, other, demo):
    assert client.post("/v1/jobs", json=JOB).status_code == 201  # the version is now cached here
    assert len(client.app.state.services.template_cache) == 1
    assert other.post("/v1/templates/mwms-demo/archive").status_code == 200
    body = assert_problem(client.post("/v1/jobs", json=JOB), 409)
    assert "archived" in body["detail"]
    # An explicit version of an archived template is refused too.
    assert_problem(client.post("/v1/jobs", json={**JOB, "template_version": 1}), 409)
    assert other.post("/v1/templates/mwms-demo/unarchive").status_code == 200
    assert client.post("/v1/jobs", json=JOB).status_code == 201


def test_a_new_version_is_used_at_once_and_old_ones_stay_as_they_were(client, other, demo):
    first = client.post("/v1/jobs", json=JOB).json()
    assert (first["template"]["version"], _workers(first)) == (1, 1)
    assert other.put("/v1/templates/mwms-demo", json=_version_body(3)).status_code == 200
    second = client.post("/v1/jobs", json=JOB).json()
    assert (second["template"]["version"], _workers(second)) == (2, 3)
    pinned = client.post("/v1/jobs", json={**JOB, "template_version": 1}).json()
    assert (pinned["template"]["version"], _workers(pinned)) == (1, 1)
    assert_problem(client.post("/v1/jobs", json={**JOB, "template_version": 3}), 404)


def test_a_template_made_again_under_the_same_name_is_not_the_cached_one(client, db_url, demo):
    # Another team's template of the same name and version is another template.
    from tests.conftest import make_token
    beta = bearer(make_token(db_url, "beta", "admin"))
    assert client.post("/v1/templates", json={**DEMO, "spec": _version_body(2)["spec"]},
                       headers=beta).status_code == 201
    alpha_job = client.post("/v1/jobs", json=JOB).json()
    beta_job = client.post("/v1/jobs", json=JOB, headers=beta).json()
    assert (_workers(alpha_job), _workers(beta_job)) == (1, 2)


def test_the_cache_keeps_at_most_its_size(api_client, settings, tokens, demo, client):
    names = ["t-one", "t-two", "t-three"]
    for i, name in enumerate(names):
        assert client.post("/v1/templates", json={**DEMO, "name": name,
                                                  "spec": _version_body(i + 1)["spec"]}).status_code == 201
    for size in (0, 2):
        with api_client(settings.model_copy(update={"template_cache_size": size}), tokens["admin"]) as c:
            for _ in range(2):
                for i, name in enumerate(names):
                    job = c.post("/v1/jobs", json={"template": name}).json()
                    assert _workers(job) == i + 1
            assert len(c.app.state.services.template_cache) == size
            assert c.app.state.services.template_cache.heads_kept == size   # the heads too (templates.cache.Head)


def test_a_revoked_token_is_refused_on_the_next_request(client, db_url, demo):
    created = client.post("/v1/tokens", json={"name": "ci", "role": "member"}).json()
    member = bearer(created["token"])
    assert client.get("/v1/templates", headers=member).status_code == 200
    # Submits remember the token's actor (auth.cache) ...
    assert client.post("/v1/jobs", json=JOB, headers=member).status_code == 201
    keyed = {**member, "Idempotency-Key": "k-1"}
    assert client.post("/v1/jobs", json=JOB, headers=keyed).status_code == 201
    assert len(client.app.state.services.token_cache) == 1
    # ... and a revocation by another process (the `trainjobs tokens revoke` command on the
    # same database) still holds from the very next request, whatever the request is.
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": db_url, "TRAINJOBS_LOG_FORMAT": "text"}
    done = subprocess.run([sys.executable, "-m", "service.cli", "tokens", "revoke", created["id"]],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert_problem(client.get("/v1/templates", headers=member), 401)
    assert_problem(client.post("/v1/jobs", json=JOB, headers=member), 401)
    assert len(client.app.state.services.token_cache) == 0   # forgotten once refused
    for request in [dict(json=JOB, params={"dry_run": True}),          # a preview
                    dict(json={"template": "no-such-template"}),        # not a 404: nothing is told
                    dict(json=JOB, headers=keyed)]:                     # a replay of its own job
        r = client.post("/v1/jobs", **{"headers": member, **request})
        assert_problem(r, 401)
    jobs = client.get("/v1/jobs").json()["items"]
    assert len(jobs) == 2


def test_a_cached_token_is_checked_on_every_submit(client, tokens, demo, db_url):
    """Every way into the cache is checked against the database in the same submit."""
    created = client.post("/v1/tokens", json={"name": "ci", "role": "member"}).json()
    member = bearer(created["token"])
    for _ in range(3):
        assert client.post("/v1/jobs", json=JOB, headers=member).status_code == 201
    assert client.post(f"/v1/tokens/{created['id']}/revoke").status_code in (200, 204)
    for params in ({}, {"dry_run": True}):
        assert_problem(client.post("/v1/jobs", json=JOB, headers=member, params=params), 401)


def test_the_submit_path_checks_the_token_before_the_body(anon_client, tokens, demo):
    bad_body = {"template": "mwms-demo", "no_such_field": 1}
    assert_problem(anon_client.post("/v1/jobs", json=bad_body), 401)
    assert_problem(anon_client.post("/v1/jobs", json=bad_body, headers=bearer("tj_unknown")), 401)
    assert_problem(anon_client.post("/v1/jobs", json=bad_body, headers=bearer(tokens["viewer"])), 403)
    assert_problem(anon_client.post("/v1/jobs", json=bad_body, headers=bearer(tokens["member"])), 422)


def test_every_outcome_of_a_submit_gives_its_connection_back(anon_client, tokens, demo):
    pool = anon_client.app.state.services.engine.pool
    member = bearer(tokens["member"])
    outcomes = [
        ({"template": "mwms-demo"}, member, {}, 201),
        ({"template": "mwms-demo"}, member, {"dry_run": True}, 200),
        ({"template": "mwms-demo"}, {}, {}, 401),
        ({"template": "mwms-demo"}, bearer(tokens["viewer"]), {}, 403),
        ({"template": "mwms-demo", "bogus": 1}, member, {}, 422),           # the body, after the token
        ({"template": "mwms-demo", "parameters": {"epochs": 0}}, member, {}, 422),  # the compiler
        ({"template": "nope"}, member, {}, 404),
    ]
    for body, headers, params, status in outcomes:
        r = anon_client.post("/v1/jobs", json=body, headers=headers, params=params)
        assert r.status_code == status, (body, r.text)
        assert pool.checkedout() == 0, (body, status)
    assert len(anon_client.get("/v1/jobs", headers=member).json()["items"]) == 1
