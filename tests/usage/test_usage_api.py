"""GET /v1/usage: every member sees each team's decayed use (it orders the queue, as the queue
shows each team's use) and its own team's use over time; another team's over time is an
operator's. Bounded parameters: a clear 4xx problem+json, never a 500 or a silent change."""
from __future__ import annotations

from datetime import timedelta

import pytest

from service.core.clock import utcnow
from service.usage.billing import floor_hour
from tests.capacity.test_planner import _alpha
from tests.conftest import bearer, make_token
from tests.usage.usagekit import fold_at, hours_ago, ran


@pytest.fixture
def scene(client, demo, session_factory):
    now = floor_hour(utcnow()) + timedelta(minutes=30)
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 5), end=hours_ago(now, 3), demand={"core": 1})
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 30), end=hours_ago(now, 27),
        demand={"core": 4}, team="beta", backend="vertex")
    fold_at(session_factory, now)
    return now


def test_a_member_sees_every_teams_decayed_use_and_its_own_over_time(client, tokens, scene):
    r = client.get("/v1/usage", headers=bearer(tokens["viewer"]))
    assert r.status_code == 200, r.text
    body = r.json()
    teams = {t["team"]: t for t in body["teams"]}
    assert [t["team"] for t in body["teams"]] == ["beta", "alpha"]            # most decayed use first
    assert teams["beta"]["units"] > teams["alpha"]["units"] > 0
    assert teams["beta"]["backends"].keys() == {"vertex"} and teams["beta"]["series"] is None
    assert sum(t["share"] for t in body["teams"]) == pytest.approx(1.0)
    [series] = teams["alpha"]["series"]
    assert series["backend"] == "local" and sum(p["units"] for p in series["points"]) == pytest.approx(2.0)
    assert body["half_life_seconds"] == 86_400 and body["billing_weights"] == {"core": 1.0, "gpu:*": 10.0}
    assert body["kept_hours"] == 240 and body["next_offset"] is None


def test_another_teams_use_over_time_is_an_operators(client, tokens, db_url, scene):
    r = client.get("/v1/usage?team=beta", headers=bearer(tokens["admin"]))
    assert r.status_code == 403 and r.headers["content-type"].startswith("application/problem+json")
    assert "operator" in r.json()["detail"]
    ops = bearer(make_token(db_url, "ops", "operator"))
    r = client.get("/v1/usage?team=beta&step=day&hours=48", headers=ops)
    assert r.status_code == 200, r.text
    [beta] = r.json()["teams"]
    [series] = beta["series"]
    assert series["backend"] == "vertex" and sum(p["units"] for p in series["points"]) == pytest.approx(12.0)
    assert all(p["at"].endswith("T00:00:00Z") for p in series["points"])     # by UTC day
    everyone = client.get("/v1/usage", headers=ops).json()["teams"]
    assert all(t["series"] is not None for t in everyone)


def test_filters_and_pages(client, tokens, db_url, scene):
    r = client.get("/v1/usage?backend=vertex&limit=1", headers=bearer(tokens["viewer"]))
    body = r.json()
    assert [t["team"] for t in body["teams"]] == ["beta"] and body["next_offset"] == 1
    page2 = client.get("/v1/usage?backend=vertex&limit=1&offset=1", headers=bearer(tokens["viewer"])).json()
    assert [(t["team"], t["units"], t["series"]) for t in page2["teams"]] == [("alpha", 0, [])]


@pytest.mark.parametrize("query,status,field", [
    ("hours=0", 422, "hours"), ("hours=72001", 422, "hours"), ("hours=745", 422, "hours"),
    ("step=week", 422, "step"), ("limit=0", 422, "limit"), ("limit=101", 422, "limit"), ("offset=-1", 422, "offset"),
    ("backend=nowhere", 404, "backend"), ("team=nobody", 404, "team"), ("backend=" + "x" * 33, 422, "backend")])
def test_bad_input_is_a_clear_problem(client, tokens, scene, query, status, field):
    r = client.get(f"/v1/usage?{query}", headers=bearer(tokens["viewer"]))
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert field in r.text


def test_an_operators_answer_is_bounded(client, db_url, scene):
    ops = bearer(make_token(db_url, "ops", "operator"))
    r = client.get("/v1/usage?limit=100&hours=744", headers=ops)       # 100 teams x 744 hourly points
    assert r.status_code == 422 and "limit" in r.text and "step=day" in r.json()["errors"][0]["fix"]
    assert client.get("/v1/usage?limit=26&hours=744", headers=ops).status_code == 200
    assert client.get("/v1/usage?limit=100&hours=744&team=beta", headers=ops).status_code == 200


def test_no_token_no_usage(client):
    assert client.get("/v1/usage", headers={"Authorization": ""}).status_code == 401


def test_before_any_recompute_the_ledger_is_empty(client, tokens):
    body = client.get("/v1/usage", headers=bearer(tokens["viewer"])).json()
    assert body["computed_at"] is None and body["total_units"] == 0
    assert [(t["team"], t["units"], t["series"]) for t in body["teams"]] == [("alpha", 0, [])]
