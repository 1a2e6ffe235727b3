"""`trainjobs serve --workers 2`: every worker serves the API, exactly one is the
controller (reconciler + local replicas), and another takes over when it dies."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

QUICK = {"name": "quick", "spec": {"container": {"image_uri": "local", "command": [
    "python", "-c", "import sys, time; time.sleep(float(sys.argv[1])); print('done')", "${seconds}"]},
    "workers": {"replica_count": 1}},
    "parameters": [{"name": "seconds", "type": "float", "default": 0.5}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    port = free_port()
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOCAL_WORK_DIR": str(tmp_path / "runs"),
           "TRAINJOBS_CONTROLLER_LOCK_PATH": str(tmp_path / "controller.lock"),
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_LOG_FORMAT": "text"}
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    token = None
    while time.monotonic() < deadline:
        text = (tmp_path / "serve.log").read_text()
        token = token or next(iter(re.findall(r"tj_[A-Za-z0-9_-]{20,}", text)), None)
        try:
            if token and httpx.get(base + "/readyz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    else:
        pytest.fail("service did not start: " + (tmp_path / "serve.log").read_text()[-2000:])
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    yield client, proc
    client.close()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30)
    log.close()


def roles(client) -> dict[int, bool]:
    seen = {}
    for _ in range(60):  # new connections spread over the workers
        r = httpx.get(str(client.base_url) + "/readyz").json()
        seen[r["pid"]] = r["controller"]
        if len(seen) == 2:
            break
    return seen


def wait_state(client, job_id, *states, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} stuck in {job['state']}")


def test_one_controller_and_jobs_from_any_worker_run(served):
    client, _ = served
    seen = roles(client)
    assert len(seen) == 2 and sorted(seen.values()) == [False, True], seen
    assert client.post("/v1/templates", json=QUICK).status_code == 201
    ids = []
    for _ in range(6):  # fresh connections: some land on the worker that is not the controller
        with httpx.Client(base_url=client.base_url, headers=client.headers) as c:
            ids.append(c.post("/v1/jobs", json={"template": "quick"}).json()["id"])
    for job_id in ids:
        assert wait_state(client, job_id, "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"

    long = client.post("/v1/jobs", json={"template": "quick", "parameters": {"seconds": 300}}).json()
    job = wait_state(client, long["id"], "RUNNING")
    with httpx.Client(base_url=client.base_url, headers=client.headers) as c:
        assert c.post(f"/v1/jobs/{long['id']}/cancel").status_code == 202
    assert wait_state(client, long["id"], "CANCELLED", "FAILED")["state"] == "CANCELLED"
    run = Path(job["backend_ref"])
    marker = f"{long['id']}/"
    leftover = [p for p in psutil.process_iter(["environ"])
                if (p.info.get("environ") or {}).get("TRAINJOBS_LOCAL_REPLICA", "").startswith(marker)]
    assert leftover == [] and run.is_dir()


def test_another_worker_takes_over_when_the_controller_dies(served):
    client, _ = served
    seen = roles(client)
    controller = next(pid for pid, is_controller in seen.items() if is_controller)
    os.kill(controller, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            now = roles(client)
        except httpx.HTTPError:
            now = {}
        if any(is_c and pid != controller for pid, is_c in now.items()):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"no new controller: {now}")
    assert client.post("/v1/templates", json=QUICK).status_code == 201
    job = client.post("/v1/jobs", json={"template": "quick"}).json()
    assert wait_state(client, job["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
