"""bench/sim_cohorts.py: the sim backend registered under several names (Kueue's cohorts in
bench/kueue_baseline.py), each a backend of its own with its own capacity, through the real
app and controller."""
from __future__ import annotations

from bench.sim_cohorts import register
from service.backends import registry
from tests.backends.localkit import Api
from tests.backends.sim.simkit import run_of, settings, template
from tests.waiting import wait_for


def test_each_name_is_a_backend_with_its_own_capacity(api_client, db_url, token, cohorts):
    assert cohorts == ["sim1", "sim2"]
    client = api_client(settings(db_url, backends=cohorts, default_backend="sim1",
                                 capacity={"sim1": {"core": 1}, "sim2": {"core": 1}}), token)
    api = Api(client)
    template(api, "long", {"sim-duration-seconds": "3600"})
    first = api.c.post("/v1/jobs", json={"template": "long"})
    assert first.status_code == 201 and first.json()["backend"] == "sim1", first.text
    other = api.c.post("/v1/jobs", json={"template": "long", "backend": "sim2"})
    assert other.status_code == 201 and other.json()["backend"] == "sim2", other.text
    behind = api.c.post("/v1/jobs", json={"template": "long", "backend": "sim1"}).json()
    # sim1's one core is the first job's; sim2's is its own, so its job runs beside it.
    for job in (first.json(), other.json()):
        assert run_of(api.wait_state(job["id"], "RUNNING")).run_ms == 3_600_000
    def counts():   # a queue read is up to TRAINJOBS_QUEUE_CACHE_SECONDS old
        items = client.get("/v1/queue").json()["items"]
        return {q["backend"]: (q["running_jobs"], q["waiting_jobs"]) for q in items}
    wait_for(lambda: counts() == {"sim1": (1, 1), "sim2": (1, 0)}, "each backend's own queue")
    assert api.job(behind["id"])["state"] == "QUEUED"
    assert client.get("/v1/capacity/sim2").json()["resources"] == {"core": 1}


def test_registering_again_is_harmless(cohorts):
    assert register(2) == cohorts     # the same entries: a second import of the plugin changes nothing
    assert {"sim1", "sim2"} <= set(registry.known())
