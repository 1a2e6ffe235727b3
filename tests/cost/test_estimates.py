"""Cost estimates through the API, against tests/cost/prices-test.json. Expected figures
are worked out by hand from that table:
  disk: 100 GB pd-ssd at 0.187 a GB-month over 730 hours = 0.0256164383561... an hour
  n1-standard-4 replica on demand: 0.19 + 0.0256164383561 = 0.2156164383561
  the demo (chief + 1 worker): 0.4312328767123 an hour."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from service.app import create_app
from service.cost.prices import PriceFileError
from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Observation
from service.lifecycle.states import JobState


def _dry(client, **body):
    r = client.post("/v1/jobs?dry_run=true", json={"template": "mwms-demo", **body})
    assert r.status_code == 200, r.text
    return r.json()["cost"]


def test_dry_run_shows_per_pool_per_hour_and_to_timeout(client, demo):
    cost = _dry(client)
    assert cost["currency"] == "USD" and cost["prices_date"] == "2026-11-01"
    assert cost["prices_source"].startswith("test table")
    assert "estimate" in cost["note"] and "not a bill" in cost["note"]
    assert "local backend" in cost["estimate_of"] and "Vertex AI in us-central1" in cost["estimate_of"]
    assert cost["pricing"] == "on_demand" and cost["complete"] is True and cost["missing"] == []
    assert [(p["role"], p["replica_count"], p["per_replica_hour"], p["per_hour"]) for p in cost["pools"]] == [
        ("chief", 1, "0.215616", "0.215616"), ("workers", 1, "0.215616", "0.215616")]
    assert cost["per_hour"] == "0.431233"
    assert (cost["timeout_seconds"], cost["timeout_from"]) == (3600, "scheduling.timeout")
    assert cost["for_timeout"] == "0.431233"
    assert cost["replicas"] == 2 and cost["accelerators"] == {}


def test_spot_accelerators_replicas_and_timeout(client, demo):
    cost = _dry(client, overrides={"chief": {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
                                   "workers": {"replica_count": 3},
                                   "scheduling": {"strategy": "SPOT", "timeout_seconds": 7200}})
    assert cost["pricing"] == "spot" and cost["strategy"] == "SPOT"
    # chief: 0.04 + 0.14 + 0.0256164383 = 0.2056164383; a worker: 0.04 + 0.0256164383 = 0.0656164383
    chief, workers = cost["pools"]
    assert (chief["per_hour"], chief["accelerator_type"], chief["accelerator_count"]) == ("0.205616", "NVIDIA_TESLA_T4", 1)
    assert (workers["per_replica_hour"], workers["per_hour"]) == ("0.065616", "0.196849")
    # 0.2056164383 + 3 * 0.0656164383 = 0.4024657534; two hours: 0.8049315068
    assert cost["per_hour"] == "0.402466" and cost["for_timeout"] == "0.804932"
    assert cost["replicas"] == 4 and cost["accelerators"] == {"NVIDIA_TESLA_T4": 1}


def test_no_timeout_is_priced_for_vertex_default_of_7_days(client, demo):
    cost = _dry(client, overrides={"scheduling": {"timeout_seconds": None}})
    assert cost["timeout_seconds"] == 7 * 24 * 3600 and "7 days" in cost["timeout_from"]
    assert cost["for_timeout"] == "72.447123"   # 0.4312328767123 * 168


def test_a_missing_price_is_named_not_guessed(client, demo):
    cost = _dry(client, overrides={"workers": {"machine_type": "n1-standard-8"}})
    assert cost["complete"] is False
    assert cost["missing"] == ["no machine price for n1-standard-8 in region us-central1"]
    assert cost["pools"][1]["per_hour"] == "0.025616"   # its disk only
    assert cost["per_hour"] == "0.241233"


def test_the_shipped_table_prices_what_it_has_and_names_the_rest(api_client, db_url, settings, tokens, demo):
    shipped = settings.model_copy(update={"price_file": None})
    with api_client(shipped, tokens["admin"]) as c:
        cost = _dry(c)
    assert cost["prices_date"] == "2026-11-22" and "cloud.google.com/vertex-ai/pricing" in cost["prices_source"]
    # n1-standard-4 at 0.21849885, twice, and their 100 GB pd-ssd boot disks at 0.17 a GB-month
    # over 730 hours (issue 37: the demo's estimate was always incomplete without it)
    assert cost["per_hour"] == "0.483573"   # 2 * (0.21849885 + 17 / 730) = 0.48357304...
    assert cost["missing"] == [] and cost["complete"] is True


def test_job_shows_estimate_and_accrued_cost_from_start_and_end(client, demo, session_factory):
    job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
    assert job["cost"]["per_hour"] == "0.431233" and job["cost"]["accrued"] is None
    t0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
    engine = Engine()
    with session_factory() as s:
        engine.apply(s, Observation(job_id=__import__("uuid").UUID(job["id"]), state=JobState.RUNNING, started_at=t0))
        s.commit()
    running = client.get(f"/v1/jobs/{job['id']}").json()["cost"]["accrued"]
    assert running["running"] is True and running["since"].startswith("2026-11-03T10:00:00")
    assert float(running["hours"]) > 0
    with session_factory() as s:
        engine.apply(s, Observation(job_id=__import__("uuid").UUID(job["id"]), state=JobState.SUCCEEDED,
                                    ended_at=t0 + timedelta(minutes=90)))
        s.commit()
    done = client.get(f"/v1/jobs/{job['id']}").json()["cost"]["accrued"]
    # 1.5 hours at 0.4312328767123
    assert (done["running"], done["hours"], done["amount"]) == (False, "1.500000", "0.646849")


@pytest.mark.parametrize("content, says", [
    ("{not json", "not JSON"),
    (json.dumps({"date": "2026-11-01", "currency": "USD", "source": "x",
                 "regions": {"r": {"machines": {"m": {"on_demand": "-1"}}}}}), "regions.r.machines.m.on_demand"),
    (json.dumps({"date": "2026-11-01", "currency": "USD", "source": "x", "regions": {}, "extra": 1}), "extra"),
])
def test_a_bad_price_file_stops_the_start_with_a_clear_error(tmp_path, settings, content, says):
    bad = tmp_path / "prices.json"
    bad.write_text(content)
    with pytest.raises(PriceFileError) as e:
        create_app(settings.model_copy(update={"price_file": bad}))
    assert str(bad) in str(e.value) and says in str(e.value)


def test_trainjobs_prepare_refuses_a_bad_price_file(tmp_path):
    env = {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite", "TRAINJOBS_PRICE_FILE": str(tmp_path / "none.json"),
           "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "service.cli", "prepare"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0
    assert "refusing to start" in r.stderr and "none.json" in r.stderr and "cannot be read" in r.stderr
