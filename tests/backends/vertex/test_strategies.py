"""Point 6 of issue 26: every scheduling strategy the locked client knows is accepted,
sent to Vertex as that enum value, and priced as docs/vertex.md says."""
from __future__ import annotations

import pytest
from google.cloud import aiplatform_v1 as v1

from service.cost.estimate import PRICING
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures

# Every value of the locked client's enum but STRATEGY_UNSPECIFIED: a client upgrade that
# adds one fails this test until the spec, the estimate and the docs know it.
KNOWN = [s.name for s in v1.Scheduling.Strategy if s.value != 0]
EXPECTED_PRICING = {"STANDARD": "on_demand", "ON_DEMAND": "on_demand", "LOW_COST": "on_demand",
                    "SPOT": "spot", "FLEX_START": "flex_start"}


def test_the_locked_client_knows_exactly_these():
    assert sorted(KNOWN) == sorted(EXPECTED_PRICING) == sorted(PRICING)


@pytest.mark.parametrize("strategy", KNOWN)
def test_each_strategy_reaches_vertex_and_is_priced(make_harness, fake_vertex, strategy):
    with make_harness() as h:
        body = {"overrides": {"scheduling": {"strategy": strategy}}}
        dry = h.client.post("/v1/jobs?dry_run=true", json={"template": "mwms-demo", **body})
        assert dry.status_code == 200, dry.text
        cost = dry.json()["cost"]
        assert (cost["strategy"], cost["pricing"]) == (strategy, EXPECTED_PRICING[strategy])
        if strategy == "LOW_COST":
            assert "Spot VMs" in cost["note"] and "the most it can cost" in cost["note"]
        if strategy == "ON_DEMAND":
            assert "deprecated name of STANDARD" in cost["note"]
        job = h.submit(**body)
        cj = fake_vertex.get(job["id"])
        sent = cj["jobSpec"]["scheduling"]["strategy"]
        # The client sent the enum as an integer; the fake keeps what it parsed, by name.
        assert sent == strategy
        assert job["backend_ref"] == cj["name"]


@pytest.mark.parametrize("strategy", ["STRATEGY_UNSPECIFIED", "DWS_FLEX_START", "spot", "PREEMPTIBLE"])
def test_an_unknown_strategy_is_a_clear_4xx(make_harness, fake_vertex, strategy):
    with make_harness() as h:
        r = h.client.post("/v1/jobs", json={"template": "mwms-demo",
                                             "overrides": {"scheduling": {"strategy": strategy}}})
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "LOW_COST" in r.text and "strategy" in r.text
        assert fake_vertex.calls["create"] == 0
