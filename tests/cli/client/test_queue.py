"""`trainjobs queue` as a real subprocess against a real service whose jobs stay QUEUED
(no running slot, no controller): capacity, use per team, the waiting jobs in order with
why; another team's jobs without id or name; a backend that is not enabled."""
from __future__ import annotations

import copy
import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, update

from service.core.clock import utcnow
from service.persistence.models import Job, TeamShare
from tests.capacity.queuekit import http_scene, queue_server, write
from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE


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



def test_queue_shows_when_a_job_likely_starts_and_when_at_the_latest(cli, scene, db_url):
    """Issue 49.2: both times, labelled. Beta's b2 ran 60 s (its template's history) and beta's
    running b1 has a one-hour limit; without its quota alpha waits for b1 to end."""
    now = utcnow()

    def history(session):
        b1 = session.get(Job, uuid.UUID(scene["b1"]))
        compiled = copy.deepcopy(b1.compiled)
        compiled["custom_job"]["jobSpec"].setdefault("scheduling", {})["timeout"] = "3600s"
        b1.compiled = compiled
        session.execute(update(Job).where(Job.id == uuid.UUID(scene["b2"])).values(
            state="SUCCEEDED", started_at=now - timedelta(minutes=10), ended_at=now - timedelta(minutes=9)))
        session.execute(delete(TeamShare))
    write(db_url, history)
    [q] = json.loads(cli("queue", "--json").stdout)["items"]
    [entry] = q["waiting"]
    likely, latest = (datetime.fromisoformat(entry[k]).astimezone(UTC) for k in ("likely_start", "estimated_start"))
    assert latest - likely > timedelta(minutes=30)
    r = cli("queue")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(line for line in lines if line.startswith("POS "))
    assert header.split()[5:9] == ["LIKELY", "AT", "THE", "LATEST"]
    row = next(line for line in lines if line.startswith("1 "))
    assert re.search(rf"{likely:%H:%M} UTC \((now|in 0h0[01]m)\)\s+{latest:%H:%M} UTC \(in 0h[56]\dm\)", row), row


def test_queue_explain_shows_each_jobs_priority_in_parts(cli, scene, db_url):
    """Issue 52.4, like Slurm's sprio: beta's job waits in the fair tier behind alpha's, which keeps
    alpha inside its nominal quota, so the tier decided; alpha's job shows only what the queue
    shows of another team's (its team's fair share, its priority, its size), not its tier or age."""
    from tests.conftest import make_token

    r = cli("queue", "--explain", TRAINJOBS_TOKEN=make_token(db_url, "beta", "viewer", "beta-reader"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(line for line in lines if line.startswith("POS "))
    assert header.split() == ["POS", "TEAM", "JOB", "TIER", "FAIRSHARE", "CLASS", "AGE", "SIZE", "DECIDED", "BY"]
    alpha = next(line for line in lines if line.startswith("1 "))
    assert re.search(r"alpha\s+\(another team's job\)\s+-\s+#1 \(borrowed 0\.00, held 0\.00, weight 1\)\s+3\s+-\s+0\.50\s+-\s*$",
                     alpha), alpha
    mine = next(line for line in lines if line.startswith("2 "))
    assert re.search(rf"beta\s+beta-hidden \({scene['b2'][:8]}\)\s+fair\s+#2 \(borrowed 1\.00, held 1\.00, weight 1\)"
                     r"\s+0\s+\d+s\s+0\.50\s+its tier\s*$", mine), mine
    assert "LIKELY" not in r.stdout and scene["a1"][:8] not in r.stdout and "alpha-waits" not in r.stdout
    [q] = json.loads(cli("queue", "--json", TRAINJOBS_TOKEN=make_token(db_url, "beta", "viewer", "beta-json")).stdout)["items"]
    assert [e["factors"]["decided_by"] for e in q["waiting"]] == [None, "tier"]


def test_queue_explain_shows_a_teams_past_use(cli, scene, server, token, session_factory):
    """Beta ran 2 cores for two hours this morning: once the usage ledger is folded, its fair share
    in --explain says its past use (all of every team's), alpha's none."""
    import httpx

    from tests.usage.usagekit import fold_at, hours_ago, ran

    now = utcnow()
    with httpx.Client(base_url=server, timeout=60) as http:
        ran(http, token, session_factory, start=hours_ago(now, 3), end=hours_ago(now, 1), demand={"core": 2}, team="beta")
    fold_at(session_factory, now)
    r = cli("queue", "--explain")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[1]: line for line in r.stdout.splitlines() if line[:1].isdigit()}
    assert "past use 0.00)" in rows["alpha"] and "past use 1.00)" in rows["beta"], r.stdout
