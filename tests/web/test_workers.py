"""`trainjobs serve --workers 2`: every worker serves the API, exactly one is the
controller, another takes over when it dies, and the workers die with their
supervisor (no orphans holding the port)."""
import os
import signal

import httpx
import psutil
import pytest

from tests.servekit import Serve, wait_state
from tests.waiting import wait_for

QUICK = {"name": "quick", "spec": {"container": {"image_uri": "local", "command": [
    "python", "-c", "import sys, time; time.sleep(float(sys.argv[1])); print('done')", "${seconds}"]},
    "workers": {"replica_count": 1}},
    "parameters": [{"name": "seconds", "type": "float", "default": 0.5}]}


@pytest.fixture
def served(tmp_path):
    service = Serve(tmp_path, {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}, workers=2,
                    log_level="info")  # ready() waits for both workers' start-up lines
    try:
        yield service.ready()
    finally:
        service.stop()


def roles(service: Serve) -> dict[int, bool]:
    seen = {}
    for _ in range(60):  # new connections spread over the workers
        r = service.readyz()
        seen[r["pid"]] = r["controller"]
        if len(seen) == 2:
            break
    return seen


def one_controller(service: Serve) -> dict[int, bool] | None:
    seen = roles(service)
    return seen if sorted(seen.values()) == [False, True] else None


def test_one_controller_and_jobs_from_any_worker_run(served):
    client = served.client
    seen = wait_for(lambda: one_controller(served), "one controller among two workers", 30)
    assert len(seen) == 2
    assert client.post("/v1/templates", json=QUICK).status_code == 201
    ids = []
    for _ in range(6):  # fresh connections: some land on the worker that is not the controller
        with httpx.Client(base_url=client.base_url, headers=client.headers) as c:
            ids.append(c.post("/v1/jobs", json={"template": "quick"}).json()["id"])
    for job_id in ids:
        assert wait_state(client, job_id, "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"

    long = client.post("/v1/jobs", json={"template": "quick", "parameters": {"seconds": 300}}).json()
    wait_state(client, long["id"], "RUNNING")
    with httpx.Client(base_url=client.base_url, headers=client.headers) as c:
        assert c.post(f"/v1/jobs/{long['id']}/cancel").status_code == 202
    assert wait_state(client, long["id"], "CANCELLED", "FAILED")["state"] == "CANCELLED"
    marker = f"{long['id']}/"
    leftover = [p for p in psutil.process_iter(["environ"])
                if (p.info.get("environ") or {}).get("TRAINJOBS_LOCAL_REPLICA", "").startswith(marker)]
    assert leftover == []


def test_another_worker_takes_over_when_the_controller_dies(served):
    seen = wait_for(lambda: one_controller(served), "one controller among two workers", 30)
    controller = next(pid for pid, is_controller in seen.items() if is_controller)
    os.kill(controller, signal.SIGKILL)
    wait_for(lambda: any(c and pid != controller for pid, c in roles(served).items()), "a new controller", 60)
    client = served.client
    assert client.post("/v1/templates", json=QUICK).status_code == 201
    job = client.post("/v1/jobs", json={"template": "quick"}).json()
    assert wait_state(client, job["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"


def test_workers_die_with_their_supervisor(tmp_path):
    first = Serve(tmp_path / "a", {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}, workers=2)
    try:
        first.ready()
        workers = {r for r in roles(first)}
        assert len(workers) == 2
        first.kill9()  # the supervisor alone: no SIGTERM reaches its workers from us
        wait_for(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                                   for p in workers), "the workers to exit with their supervisor", 30)
        # Nobody holds the port any more: the next start on it can bind.
        assert not [c for c in psutil.net_connections("tcp")
                    if c.laddr and c.laddr.port == first.port and c.status == psutil.CONN_LISTEN]
    finally:
        first.stop()
