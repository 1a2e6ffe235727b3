"""A submit with several independent mistakes answers one 422 naming each (issue 25:
a bad parameter was unreported until the overrides were fixed, a bad chief count until
the worker count was), for admins and members, on SQLite and PostgreSQL."""
from __future__ import annotations

from tests.apikit import assert_problem
from tests.conftest import bearer


def fields(body: dict) -> list[str]:
    return [e["field"] for e in body["errors"]]


def test_every_mistake_of_a_submit_is_in_one_422(client, demo):
    r = client.post("/v1/jobs", json={
        "template": "mwms-demo", "parameters": {"epochs": 0, "batch_size": "big"},
        "overrides": {"scheduling": {"timeout_seconds": -5}, "chief": {"replica_count": 2},
                      "workers": {"replica_count": 0, "machine_type": "n9-giant-7"}}})
    body = assert_problem(r, 422)
    assert sorted(fields(body)) == sorted([
        "spec.scheduling.timeout_seconds", "spec.workers.replica_count",   # the merged spec's schema
        "parameters.epochs", "parameters.batch_size",                      # the parameters
        "spec.chief.replica_count", "spec.workers.machine_type"])          # the pools' rules
    by_field = {e["field"]: e for e in body["errors"]}
    assert "n9-giant-7" in by_field["spec.workers.machine_type"]["message"]
    assert "not 2" in by_field["spec.chief.replica_count"]["message"] and by_field["spec.chief.replica_count"]["fix"]
    assert "(and 5 more)" in body["detail"] and "backend's checks" in body["detail"]
    assert client.get("/v1/jobs").json()["items"] == []


def test_broken_overrides_do_not_hide_the_parameters_nor_an_unknown_backend(client, demo):
    r = client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 1000},
                                      "overrides": ["workers", 3], "backend": "mainframe"})
    body = assert_problem(r, 422)
    assert fields(body) == ["backend", "overrides", "spec", "parameters.epochs"]
    assert "not checked" in body["errors"][2]["message"]     # the merged spec could not be built: said so


def test_a_member_gets_every_problem_within_what_the_template_lets_members_change(client, demo, tokens):
    r = client.post("/v1/jobs", headers=bearer(tokens["member"]), json={
        "template": "mwms-demo", "parameters": {"learning_rate": 7},
        "overrides": {"workers": {"replica_count": 0, "machine_type": "n9-giant-7"},
                      "chief": {"machine_type": "n1-standard-3"}}})
    body = assert_problem(r, 422)
    assert fields(body) == ["spec.workers.replica_count", "parameters.learning_rate",
                            "spec.chief.machine_type", "spec.workers.machine_type"]
