"""One controller per database, whatever the working directories: several real
`trainjobs serve` processes on one PostgreSQL (three) or SQLite (two) database, a
local job and Vertex jobs (on the fake), a cancel through a process that does not
control, kill -9 of the controller, and a takeover that loses and repeats nothing."""
from __future__ import annotations

import json
import time

import pytest

from service.core.config import default_local_work_dir
from service.demo import demo_template
from tests.backends.localkit import PROGRAM, job_processes, kill_all
from tests.conftest import truncate_all
from tests.fakes.harness import LOCATION, PROJECT, fake_logging, fake_vertex  # noqa: F401 - fixtures
from tests.servekit import Serve, wait_state
from tests.waiting import wait_for

TAKEOVER_SECONDS = 10.0  # what the service promises (docs/deploy.md)

GATED = {"name": "gated", "parameters": [{"name": "gate", "type": "string"}],
         "spec": {"container": {"image_uri": "local", "command": ["python", str(PROGRAM)],
                                "args": ["--wait-file", "${gate}"]}}}
LONG = {"name": "long", "spec": {"container": {"image_uri": "local", "command": ["python", str(PROGRAM)],
                                               "args": ["--sleep", "600"]}}}


def vertex_template() -> dict:
    t = demo_template().model_dump(mode="json", exclude_none=True)
    t["name"] = "on-vertex"
    return t


def controllers(services: list[Serve]) -> list[Serve]:
    return [s for s in services if s.proc.poll() is None and s.is_controller()]


def run_scenario(services: list[Serve], fake, runs) -> None:
    for s in services:
        s.ready()
    # Exactly one controller, whichever started first.
    only = wait_for(lambda: controllers(services) if len(controllers(services)) == 1 else None,
                      "exactly one controller", 30)
    assert len(only) == 1
    leader = only[0]
    others = [s for s in services if s is not leader]
    api = others[0].client
    for t in (GATED, LONG, vertex_template()):
        r = api.post("/v1/templates", json=t)
        assert r.status_code == 201, r.text

    gate = runs.parent / "gate-survivor"
    survivor = api.post("/v1/jobs", json={"template": "gated", "parameters": {"gate": str(gate)}}).json()
    doomed = api.post("/v1/jobs", json={"template": "long"}).json()
    on_vertex = [api.post("/v1/jobs", json={"template": "on-vertex", "backend": "vertex"}).json()
                 for _ in range(3)]
    wait_state(api, survivor["id"], "RUNNING")
    wait_state(api, doomed["id"], "RUNNING")
    for j in on_vertex:
        wait_for(lambda: fake.find(j["id"]), f"the CustomJob of {j['id']}", 60)

    # A cancel asked of a process that does not control ends CANCELLED, never FAILED(143).
    r = others[-1].client.post(f"/v1/jobs/{doomed['id']}/cancel")
    assert r.status_code == 202, r.text
    assert wait_state(api, doomed["id"], "CANCELLED", "FAILED")["state"] == "CANCELLED"

    # kill -9 of the controller: another process takes over within the promised time.
    leader.kill9()
    killed_at = time.monotonic()
    new = wait_for(lambda: controllers(others), "a new controller", 60, 0.1)
    took = time.monotonic() - killed_at
    print(f"takeover took {took:.1f} s")
    assert took <= TAKEOVER_SECONDS, f"takeover took {took:.1f} s"
    assert len(new) == 1

    # The survivor's replicas outlived the old controller and are followed again: never failed.
    assert len(job_processes(runs, survivor["id"])) == 2  # wrapper + replica
    late = api.post("/v1/jobs", json={"template": "on-vertex", "backend": "vertex"}).json()
    wait_for(lambda: fake.find(late["id"]), "the CustomJob created by the new controller", 60)
    gate.touch()
    done = wait_state(api, survivor["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]

    for j in [*on_vertex, late]:
        fake.set_state(j["id"], "JOB_STATE_RUNNING")
        fake.set_state(j["id"], "JOB_STATE_SUCCEEDED")
    for j in [*on_vertex, late]:
        assert wait_state(api, j["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
        assert len(fake.find(j["id"])) == 1  # exactly one CustomJob each
    assert fake.calls["create"] == 4
    for j in (survivor, doomed, *on_vertex, late):
        states = [e["to_state"] for e in api.get(f"/v1/jobs/{j['id']}/events").json()]
        assert len(states) == len(set(states)), states  # no state written twice


def vertex_env(fake, fake_logs) -> dict[str, str]:
    return {"TRAINJOBS_BACKENDS": json.dumps(["local", "vertex"]), "TRAINJOBS_DEFAULT_BACKEND": "local",
            "TRAINJOBS_VERTEX_PROJECT": PROJECT, "TRAINJOBS_VERTEX_LOCATION": LOCATION,
            "TRAINJOBS_VERTEX_API_ENDPOINT": fake.url, "TRAINJOBS_LOGGING_API_ENDPOINT": fake_logs.url}


@pytest.mark.postgres
@pytest.mark.slow
def test_three_services_on_postgresql(pg_database, tmp_path, fake_vertex, fake_logging):  # noqa: F811
    truncate_all(pg_database)
    runs = tmp_path / "runs"
    env = {"TRAINJOBS_DATABASE_URL": pg_database, "TRAINJOBS_LOCAL_WORK_DIR": str(runs),
           **vertex_env(fake_vertex, fake_logging)}
    services = [Serve(tmp_path / f"cwd-{i}", env, name=f"serve-{i}") for i in range(3)]
    try:
        run_scenario(services, fake_vertex, runs)
    finally:
        for s in services:
            s.stop()
        kill_all(runs)


@pytest.mark.slow
def test_two_services_on_sqlite(tmp_path, fake_vertex, fake_logging):  # noqa: F811
    db = tmp_path / "data" / "trainjobs.db"
    db.parent.mkdir()
    db.parent.chmod(0o711)
    # No run folder setting: it is tied to the database file, whatever each process's cwd.
    env = {"TRAINJOBS_DATABASE_URL": f"sqlite:///{db}", **vertex_env(fake_vertex, fake_logging)}
    services = [Serve(tmp_path / f"cwd-{i}", env, name=f"serve-{i}") for i in range(2)]
    runs = default_local_work_dir(f"sqlite:///{db}")
    try:
        run_scenario(services, fake_vertex, runs)
        assert runs.is_dir() and not (tmp_path / "cwd-0" / ".trainjobs").exists()
        assert runs.parent == db.parent and "trainjobs.db" not in runs.name   # no database name in a job's view
        assert oct(db.stat().st_mode & 0o777) == "0o600"  # replicas (other uids) cannot read it
    finally:
        for s in services:
            s.stop()
        kill_all(runs)
