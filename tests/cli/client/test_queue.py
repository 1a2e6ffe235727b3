"""`trainjobs queue` as a real subprocess against a real service whose jobs stay QUEUED
(no running slot, no controller): capacity, use per team, the waiting jobs in order with
why; another team's jobs without id or name; a backend that is not enabled."""
from __future__ import annotations

import json

import httpx
import pytest

from service.app import create_app
from tests.apikit import DEMO
from tests.backends.localkit import settings_for, thread_server
from tests.capacity.queuekit import set_capacity, set_share, shape
from tests.conftest import bearer, make_token


@pytest.fixture
def server(db_url, work_dir):  # noqa: F811
    settings = settings_for(db_url, work_dir, local_max_running_jobs=0, run_reconciler=False, queue_cache_seconds=0)
    with thread_server(create_app(settings)) as url:
        yield url


@pytest.fixture
def scene(server, token, db_url) -> dict:
    beta = bearer(make_token(db_url, "beta", "admin"))
    alpha = bearer(token)
    ids = {}
    with httpx.Client(base_url=server, timeout=60) as http:
        for headers in (alpha, beta):
            assert http.post("/v1/templates", json=DEMO, headers=headers).status_code == 201
        for key, name, headers in (("b1", "beta-running", beta), ("b2", "beta-hidden", beta),
                                   ("a1", "alpha-waits", alpha)):
            r = http.post("/v1/jobs", json={"template": DEMO["name"], "display_name": name}, headers=headers)
            assert r.status_code == 201, r.text
            ids[key] = r.json()["id"]
    set_capacity(db_url, "local", {"core": 2})
    set_share(db_url, "alpha", "local", {"core": 1})
    shape(db_url, ids["b1"], demand={"core": 2}, running=True)
    shape(db_url, ids["b2"], demand={"core": 1})
    shape(db_url, ids["a1"], demand={"core": 1}, priority=3)
    return ids


def test_queue_shows_capacity_teams_and_the_waiting_jobs_in_order(cli, scene):
    r = cli("queue")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "backend local: capacity 2 core (set through the API); in use 2 core; free 0 core" in out
    assert "1 running, 2 waiting (0 about to start)" in out
    lines = out.splitlines()
    beta_row = next(line for line in lines if line.split()[:1] == ["beta"])
    assert beta_row.split()[1:] == ["-", "2", "core", "2", "core", "1", "1", "1"]   # borrows all it uses
    first = next(line for line in lines if line.startswith("1 "))
    assert "alpha" in first and "alpha-waits" in first and scene["a1"][:8] in first and "needs 1 core" in first
    second = next(line for line in lines if line.startswith("2 "))
    assert "beta" in second and "another team's job" in second
    assert scene["b2"][:8] not in out and "beta-hidden" not in out and scene["b1"][:8] not in out


def test_queue_json_and_one_backend(cli, scene):
    r = cli("queue", "--backend", "local", "--json")
    assert r.returncode == 0, r.stderr
    [q] = json.loads(r.stdout)["items"]
    assert [(e["position"], e["team"], e["id"]) for e in q["waiting"]] == [(1, "alpha", scene["a1"]), (2, "beta", None)]


def test_a_backend_not_enabled_is_a_clear_error(cli, scene):
    r = cli("queue", "--backend", "vertex")
    assert r.returncode == 2 and "404" in r.stderr and "not enabled" in r.stderr and "local" in r.stderr
    r = cli("queue", "--limit", "0")
    assert r.returncode == 2 and "422" in r.stderr

