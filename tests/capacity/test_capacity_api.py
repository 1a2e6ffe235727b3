"""The operator's shared-capacity settings over HTTP (capacity, team shares, priority classes,
the audit log), who may change them (an operator token, made on the host only: a team admin
cannot become one), and what a submit learns from them: its class's priority, its demand, and a
422 for a job that could never fit."""
from __future__ import annotations

import pytest

from service.persistence.models import Job
from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer, make_token


@pytest.fixture
def operator(db_url) -> dict[str, str]:
    return bearer(make_token(db_url, "ops", "operator"))


def test_an_operator_sets_capacity_and_it_is_audited(client, operator):
    r = client.put("/v1/capacity/local", json={"resources": {"core": 4, "gpu": 1}}, headers=operator)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["resources"] == {"core": 4, "gpu": 1} and out["source"] == "api" and out["offered"]["core"] >= 1
    assert client.get("/v1/capacity/local").json()["resources"] == {"core": 4, "gpu": 1}   # any token reads it
    audit = client.get("/v1/audit", headers=operator).json()["items"]
    assert audit[0]["action"] == "capacity.set" and audit[0]["actor"] == "operator-user@ops"
    assert audit[0]["after"] == {"resources": {"core": 4, "gpu": 1}} and audit[0]["before"] == {"resources": {}}
    assert client.delete("/v1/capacity/local", headers=operator).status_code == 204
    assert client.get("/v1/capacity/local").json()["source"] == "none"


def test_team_admins_and_members_cannot_change_shared_settings(client, tokens):
    """Hostile team admin: every operator route answers 403, and the token API makes no operator."""
    for method, path, body in (("put", "/v1/capacity/local", {"resources": {"core": 64}}),
                               ("delete", "/v1/capacity/local", None),
                               ("put", "/v1/teams/alpha/shares/local", {"nominal": {"core": 64}}),
                               ("delete", "/v1/teams/alpha/shares/local", None),
                               ("put", "/v1/priority-classes/mine", {"value": 10**6, "preempts": True}),
                               ("delete", "/v1/priority-classes/mine", None), ("get", "/v1/audit", None)):
        r = client.request(method, path, json=body)
        assert_problem(r, 403)
        assert "operator" in r.json()["detail"]
    assert_problem(client.post("/v1/tokens", json={"name": "up", "role": "operator"}), 422)
    assert client.get("/v1/capacity/local").json()["source"] == "none"


@pytest.mark.parametrize("body, field", [
    ({"resources": {"cores": 4}}, "resources"), ({"resources": {"core": -1}}, "resources"),
    ({"resources": {"gpu:nvidia": 1}}, "resources"), ({"resources": {"core": 4}, "extra": 1}, "extra")])
def test_bad_capacity_is_a_clear_422(client, operator, body, field):
    r = client.put("/v1/capacity/local", json=body, headers=operator)
    assert_problem(r, 422)


@pytest.mark.parametrize("path, body, field, words", [
    ("/v1/capacity/local", {"resources": {"core": True}}, "resources.core", "not a boolean"),
    ("/v1/capacity/local", {"resources": {"core": 2.0}}, "resources.core", "not a fractional number"),
    ("/v1/capacity/local", {"resources": {"core": "4"}}, "resources.core", "not a string"),
    ("/v1/teams/alpha/shares/local", {"nominal": {"core": True}}, "nominal.core", "not a boolean"),
    ("/v1/teams/alpha/shares/local", {"borrowing_limit": {"gpu": False}}, "borrowing_limit.gpu", "not a boolean"),
    ("/v1/teams/alpha/shares/local", {"lending_limit": {"core": 1.5}}, "lending_limit.core", "whole number"),
    ("/v1/teams/alpha/shares/local", {"weight": 5e-324}, "weight", "greater than or equal to 0.001"),
    ("/v1/teams/alpha/shares/local", {"weight": 0.0009}, "weight", "greater than or equal to 0.001"),
    ("/v1/teams/alpha/shares/local", {"weight": True}, "weight", "not a boolean"),
    ("/v1/teams/alpha/shares/local", {"weight": "2"}, "weight", "not a string"),
    ("/v1/teams/alpha/shares/local", {"weight": 1001}, "weight", "less than or equal to 1000"),
    ("/v1/priority-classes/urgent", {"value": True}, "value", "not a boolean"),
    ("/v1/priority-classes/urgent", {"value": 10.0}, "value", "whole number"),
    ("/v1/priority-classes/urgent", {"value": 1, "preempts": 1}, "preempts", "true or false"),
    ("/v1/priority-classes/urgent", {"value": 1, "preempts": "yes"}, "preempts", "true or false")])
def test_counts_weights_and_flags_are_what_they_say(client, operator, path, body, field, words):
    """A JSON boolean is no count (true was stored as 1), 2.0 is no count either (refused rather
    than rounded), a weight is a number from 0.001 (5e-324 was stored and made the team's share
    infinite to the scheduler), a flag is true or false: each a 422 naming the field, nothing stored."""
    r = client.put(path, json=body, headers=operator)
    problem = assert_problem(r, 422, field)
    message = next(e["message"] for e in problem["errors"] if e["field"] == field)
    assert words in message, problem
    assert problem["detail"].startswith(field), problem
    assert client.get("/v1/audit", headers=operator).json()["items"] == []


def test_whole_numbers_and_bounded_weights_are_taken(client, operator):
    r = client.put("/v1/capacity/local", json={"resources": {"core": 4, "gpu": 0}}, headers=operator)
    assert r.status_code == 200 and r.json()["resources"] == {"core": 4, "gpu": 0}, r.text
    for weight in (0.001, 2, 1000):
        r = client.put("/v1/teams/alpha/shares/local", json={"nominal": {"core": 1}, "weight": weight}, headers=operator)
        assert r.status_code == 200 and r.json()["weight"] == weight, r.text
    r = client.put("/v1/priority-classes/low", json={"value": -5, "preempts": False}, headers=operator)
    assert r.status_code == 200 and (r.json()["value"], r.json()["preempts"]) == (-5, False), r.text


def test_a_weight_stored_before_the_bound_still_reads_and_can_be_corrected(client, operator, session_factory):
    from service.persistence.models import Team, TeamShare

    with session_factory() as s:
        team = s.query(Team).filter_by(name="alpha").one()
        s.add(TeamShare(team_id=team.id, backend="local", nominal={"core": 1}, weight=5e-324))
        s.commit()
    r = client.get("/v1/teams/alpha/shares/local", headers=operator)
    assert r.status_code == 200 and r.json()["weight"] == 5e-324, r.text
    r = client.put("/v1/teams/alpha/shares/local", json={"nominal": {"core": 1}, "weight": 1}, headers=operator)
    assert r.status_code == 200, r.text
    assert client.get("/v1/audit", headers=operator).json()["items"][0]["before"]["weight"] == 5e-324


def test_unknown_backend_and_too_many_resources(client, operator, settings):
    r = client.put("/v1/capacity/vertex", json={"resources": {"vcpu": 8}}, headers=operator)
    assert_problem(r, 404)
    assert "local" in r.json()["detail"]
    many = {f"gpu:TYPE_{i}": 1 for i in range(65)}
    assert_problem(client.put("/v1/capacity/local", json={"resources": many}, headers=operator), 422)


def test_shares_validate_and_the_nominal_quotas_must_fit(client, operator, db_url):
    make_token(db_url, "beta", "member")
    assert client.put("/v1/capacity/local", json={"resources": {"core": 4}}, headers=operator).status_code == 200
    r = client.put("/v1/teams/alpha/shares/local", json={"nominal": {"core": 3}, "weight": 2}, headers=operator)
    assert r.status_code == 200, r.text
    r = client.put("/v1/teams/beta/shares/local", json={"nominal": {"core": 2}}, headers=operator)
    assert_problem(r, 422)
    assert "add up to 5" in r.text and "by 1" in r.text
    r = client.put("/v1/teams/beta/shares/local", json={"nominal": {"core": 1}, "lending_limit": {"core": 2}},
                   headers=operator)
    assert_problem(r, 422)
    assert_problem(client.put("/v1/teams/nobody/shares/local", json={}, headers=operator), 404)
    assert_problem(client.put("/v1/teams/alpha/shares/local", json={"weight": 0}, headers=operator), 422)
    # A member sees its own team's share, never another's.
    assert client.get("/v1/teams/alpha/shares/local").json()["nominal"] == {"core": 3}
    assert [s["team"] for s in client.get("/v1/shares").json()] == ["alpha"]
    assert_problem(client.get("/v1/teams/beta/shares/local"), 404)
    assert {s["team"] for s in client.get("/v1/shares", headers=operator).json()} == {"alpha"}


def test_priority_classes_at_submit(client, operator, demo, session_factory, db_url):
    r = client.put("/v1/priority-classes/urgent", json={"value": 100, "preempts": True, "teams": ["beta"]},
                   headers=operator)
    assert r.status_code == 200, r.text
    assert client.put("/v1/priority-classes/batch", json={"value": -10}, headers=operator).status_code == 200
    listed = {c["name"]: c["usable"] for c in client.get("/v1/priority-classes").json()}
    assert listed == {"urgent": False, "batch": True}
    # A template's default class; a member may not pick another unless overridable lists it.
    spec = {**DEMO["spec"], "priority_class": "batch"}
    assert client.post("/v1/templates", json={**DEMO, "name": "batchy", "spec": spec}).status_code == 201
    job = client.post("/v1/jobs", json={"template": "batchy"}).json()
    with session_factory() as s:
        row = s.get(Job, __import__("uuid").UUID(job["id"]))
        assert (row.priority_class, row.priority, row.may_preempt) == ("batch", -10, False)
        assert row.demand == {"core": 2}   # the demo's chief and worker: a core each
    member = bearer(make_token(db_url, "alpha", "member", name="m"))
    r = client.post("/v1/jobs", json={"template": "batchy", "overrides": {"priority_class": "urgent"}},
                    headers=member)
    assert_problem(r, 403)
    # Even where the template opens it, a team may use only the classes made for it.
    spec = {**spec, "overridable": [*spec["overridable"], "priority_class"]}
    assert client.post("/v1/templates", json={**DEMO, "name": "open", "spec": spec}).status_code == 201
    r = client.post("/v1/jobs", json={"template": "open", "overrides": {"priority_class": "urgent"}}, headers=member)
    assert_problem(r, 403)
    assert "may not use priority class 'urgent'" in r.json()["detail"]
    r = client.post("/v1/jobs", json={"template": "open", "overrides": {"priority_class": "nope"}}, headers=member)
    assert_problem(r, 422, "priority_class")
    assert "urgent" in r.text and "batch" in r.text
    audit = [e["action"] for e in client.get("/v1/audit", headers=operator).json()["items"]]
    assert audit == ["priority_class.set", "priority_class.set"]


def test_a_job_that_could_never_fit_is_refused_at_submit(client, operator, demo):
    assert client.put("/v1/capacity/local", json={"resources": {"core": 1}}, headers=operator).status_code == 200
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    body = assert_problem(r, 422, "backend")
    assert "asks 2 cores; backend local has 1 in all" in r.text and "PUT /v1/capacity/local" in r.text, body
    assert client.put("/v1/capacity/local", json={"resources": {"core": 8}}, headers=operator).status_code == 200
    assert client.put("/v1/teams/alpha/shares/local", json={"nominal": {"core": 1}, "borrowing_limit": {"core": 0}},
                      headers=operator).status_code == 200
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    assert_problem(r, 422, "backend")
    assert "team alpha may use at most 1" in r.text
    assert client.delete("/v1/teams/alpha/shares/local", headers=operator).status_code == 204
    assert client.post("/v1/jobs", json={"template": "mwms-demo"}).status_code == 201


def test_a_team_admin_cannot_revoke_its_operator(client, db_url):
    """Hostile admin of the operator's own team: the operator's token is not its to revoke."""
    ops = make_token(db_url, "alpha", "operator", name="ops")
    listed = {t["name"]: t["id"] for t in client.get("/v1/tokens").json()}
    r = client.post(f"/v1/tokens/{listed['ops']}/revoke")
    assert_problem(r, 403)
    assert client.get("/v1/audit", headers=bearer(ops)).status_code == 200   # still valid
