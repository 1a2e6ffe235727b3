"""Issue 52.1: never two launches of a job that accepts several backends, also when the controller
is killed (SIGKILL) between the decision and the launch. The first service (its own OS process,
tests/backends/sim/across_crash.py) places the job on sim2, its preferred sim1 being full, and
dies at one step; the next (this process) starts with room on sim1 as well.

- decided (nothing written): the next controller decides again, and sim1, now free and
  preferred, takes it;
- claimed (the attempt that claims sim2 committed, no submit) and submitted (sim2 took it, its
  answer lost): the claim binds: it launches on sim2 alone, never on sim1, though sim1 has room.

On SQLite and PostgreSQL."""
from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory
from tests.backends.localkit import Api, ServiceProcess
from tests.backends.sim.across_crash import STEPS
from tests.backends.sim.simkit import settings, template
from tests.conftest import bearer
from tests.servekit import free_port
from tests.waiting import wait_for

LONG = {"sim-duration-seconds": "3600"}
ROOT = Path(__file__).resolve().parents[3]


def _first_service(db_url: str, step: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = ServiceProcess.env_of(settings(db_url, backends=["sim1", "sim2"], default_backend="sim1",
                                         capacity={"sim1": {"core": 1}, "sim2": {"core": 1}}))
    env["TRAINJOBS_TEST_KILL_AT"] = step
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "tests.backends.sim.across_crash:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                            env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT, cwd=ROOT)
    return proc, f"http://127.0.0.1:{port}"


def _row(db_url: str, job_id: str):
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            return s.execute(select(Job.state, Job.backend, Job.launch_attempted_at, Job.backend_ref)
                             .where(Job.id == uuid.UUID(job_id))).one()
    finally:
        engine.dispose()


@pytest.mark.parametrize("step", STEPS)
def test_a_controller_killed_while_placing_never_launches_twice(step, db_url, token, tmp_path, api_client, cohorts):
    proc, url = _first_service(db_url, step, tmp_path / "first.log")
    try:
        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "first.log").read_text(errors="replace")[-3000:]
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        wait_for(up, "the first service to answer", 120, 0.1)
        first = Api(httpx.Client(base_url=url, headers=bearer(token), timeout=30))
        template(first, "either", LONG, backends=["sim1", "sim2"])
        blocker = first.c.post("/v1/jobs", json={"template": "either", "backend": "sim1"}).json()
        assert first.wait_state(blocker["id"], "RUNNING")["backend"] == "sim1"
        job = first.c.post("/v1/jobs", json={"template": "either"}).json()
        assert job["accepts"] == ["sim1", "sim2"]
        assert proc.wait(60) == -signal.SIGKILL, (tmp_path / "first.log").read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    state, backend, attempted, ref = _row(db_url, job["id"])
    assert state == "QUEUED" and ref is None
    if step == "decided":
        assert backend == "sim1" and attempted is None            # no claim: decided again
    else:
        assert backend == "sim2" and attempted is not None        # claimed for sim2 alone
    # The next controller: sim1 (preferred) has a core free now, and so has sim2.
    client = api_client(settings(db_url, backends=cohorts, default_backend="sim1",
                                 capacity={"sim1": {"core": 2}, "sim2": {"core": 1}}), token)
    api = Api(client)
    running = api.wait_state(job["id"], "RUNNING")
    expected = "sim1" if step == "decided" else "sim2"
    assert running["backend"] == expected, running
    placed = [e["reason"] for e in api.events(job["id"]) if e["reason"].startswith("placed on ")]
    assert placed and all(p.startswith(f"placed on {expected}: ") for p in placed), placed
    submitted = [e for e in api.events(job["id"]) if e["to_state"] == "PENDING"]
    assert len(submitted) == 1, api.events(job["id"])
    # Nothing else runs: the blocker on sim1, this job on its one backend.
    wait_for(lambda: {q["backend"]: q["running_jobs"] for q in client.get("/v1/queue").json()["items"]}
             == ({"sim1": 2, "sim2": 0} if step == "decided" else {"sim1": 1, "sim2": 1}), "the queues' counts")
