"""`trainjobs queue` as a real subprocess against a real service whose jobs stay QUEUED
(no running slot, no controller): capacity, use per team, the waiting jobs in order with
why; another team's jobs without id or name; a backend that is not enabled."""
from __future__ import annotations

import json

import pytest

from tests.capacity.queuekit import http_scene, queue_server


@pytest.fixture
def server(db_url, work_dir):  # noqa: F811
    with queue_server(db_url, work_dir) as url:
        yield url


@pytest.fixture
def scene(server, token, db_url) -> dict:
    return http_scene(server, token, db_url)


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

