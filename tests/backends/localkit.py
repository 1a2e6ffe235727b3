"""Helpers for tests that run real local jobs: settings, templates built around
programs/replica.py, waiting without timing assumptions, and finding (and, at
teardown, killing) every replica process a test started."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import psutil

from service.backends.local.processes import MARKER
from service.config import Settings

PROGRAM = Path(__file__).parent / "programs" / "replica.py"
TIMEOUT = 60.0  # generous: a busy 2-core machine


def settings_for(db_url: str, work_dir: Path, **overrides) -> Settings:
    values = dict(database_url=db_url, backends=["local"], default_backend="local", local_work_dir=work_dir,
                  local_cancel_grace_seconds=3.0, reconcile_interval_seconds=0.2, seed_demo_template=False)
    values.update(overrides)
    return Settings(**values)


def spec(chief: list[str], *, workers: list[str] | None = None, worker_count: int = 1,
         ps: list[str] | None = None, evaluator: list[str] | None = None,
         base_output: str | None = "gs://trainjobs-test/run", command: list[str] | None = None) -> dict:
    """A template spec whose roles run programs/replica.py with the given args."""
    out: dict = {
        "container": {"image_uri": "trainjobs-test:1", "command": command or ["python", str(PROGRAM)]},
        "chief": {"container": {"args": chief}},
    }
    if workers is not None:
        out["workers"] = {"replica_count": worker_count, "container": {"args": workers}}
    if ps is not None:
        out["distribution"] = "parameter_server"
        out["parameter_servers"] = {"container": {"args": ps}}
    if evaluator is not None:
        out["evaluator"] = {"container": {"args": evaluator}}
    if base_output:
        out["base_output_directory"] = base_output
    return out


def handle(job_id, state, chief_args: list[str]):
    """A JobHandle for driving a LocalBackend directly (no database)."""
    from service import jobspec
    from service.lifecycle.protocol import JobHandle
    from service.models import utcnow

    _, compiled = jobspec.build(spec(chief_args), [], {}, None, display_name="t", labels={})
    return JobHandle(id=job_id, state=state, backend_ref=None, compiled=compiled, created_at=utcnow())


def run_path(job_or_ref) -> Path:
    """A local job's run folder, from its backend reference (`<host>:<path>`)."""
    ref = job_or_ref["backend_ref"] if isinstance(job_or_ref, dict) else job_or_ref
    host, _, path = ref.partition(":")
    assert host == socket.gethostname(), ref
    return Path(path)


def wait_for(predicate: Callable[[], object], what: str, timeout: float = TIMEOUT, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class Api:
    """The HTTP calls the tests make, over a TestClient or an httpx.Client."""

    def __init__(self, client):
        self.c = client

    def template(self, name: str, spec_: dict, **body) -> None:
        r = self.c.post("/v1/templates", json={"name": name, "spec": spec_, **body})
        assert r.status_code == 201, r.text
        self.wait_template(name)

    def wait_template(self, name: str) -> None:
        # SessionDep commits after the response is sent (a request-scoped yield
        # dependency), so over a real server a quick next request may not see it yet.
        wait_for(lambda: self.c.get(f"/v1/templates/{name}").status_code == 200, f"template {name}", 10)

    def submit(self, template: str, **body) -> dict:
        r = self.c.post("/v1/jobs", json={"template": template, "backend": "local", **body})
        assert r.status_code == 201, r.text
        return r.json()

    def job(self, job_id: str) -> dict:
        r = self.c.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def events(self, job_id: str) -> list[dict]:
        r = self.c.get(f"/v1/jobs/{job_id}/events")
        assert r.status_code == 200, r.text
        return r.json()

    def wait_state(self, job_id: str, *states: str, timeout: float = TIMEOUT) -> dict:
        seen: list[str] = []

        def reached():
            job = self.job(job_id)
            seen.append(job["state"])
            return job if job["state"] in states else None
        try:
            return wait_for(reached, f"job {job_id} to reach {states}", timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; last state {seen[-1:]}, error {self.job(job_id).get('error')}") from None

    def logs(self, job_id: str, **params) -> dict:
        r = self.c.get(f"/v1/jobs/{job_id}/logs", params=params)
        assert r.status_code == 200, r.text
        return r.json()

    def all_logs(self, job_id: str, since: str | None = None, **params) -> list[dict]:
        lines = []
        while True:
            page = self.logs(job_id, **params, **({"since": since} if since else {}))
            lines += page["lines"]
            since = page["cursor"]
            if not page["lines"]:
                return lines


def replica_processes(work_dir: Path) -> list[psutil.Process]:
    """Live processes started for runs under `work_dir` (wrappers, commands, their children)."""
    try:
        ours = {p.name for p in Path(work_dir).iterdir()}
    except FileNotFoundError:
        return []
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            marker = p.environ().get(MARKER)
        except (psutil.Error, OSError):
            continue
        if marker and marker.split("/", 1)[0] in ours:
            found.append(p)
    return found


def job_processes(work_dir: Path, job_id: str) -> list[psutil.Process]:
    out = []
    for p in replica_processes(work_dir):
        try:
            if p.environ().get(MARKER, "").startswith(f"{job_id}/"):
                out.append(p)
        except psutil.Error:
            continue
    return out


def assert_no_processes(work_dir: Path, job_id: str | None = None, timeout: float = TIMEOUT) -> None:
    find = (lambda: job_processes(work_dir, job_id)) if job_id else (lambda: replica_processes(work_dir))
    wait_for(lambda: not find(), f"no replica process left ({find()})", timeout)


def kill_all(work_dir: Path) -> None:
    for p in replica_processes(work_dir):
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def thread_server(app):
    """The app on a real uvicorn server on 127.0.0.1, in a thread of this process."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "the server to start", 30, 0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


class ServiceProcess:
    """The service as its own OS process (uvicorn), so a test can kill -9 it."""

    def __init__(self, settings: Settings, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        for key, value in settings.model_dump().items():
            if value is not None:
                env[f"TRAINJOBS_{key.upper()}"] = json.dumps(value) if isinstance(value, (list, dict)) \
                    else str(value)
        self.log_path = Path(log_path)
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2])

    def wait_ready(self, timeout: float = 120) -> None:
        import httpx

        def up():
            assert self.proc.poll() is None, \
                f"the service exited ({self.proc.returncode}): {self.log_path.read_text(errors='replace')[-3000:]}"
            try:
                return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        wait_for(up, "the service to answer", timeout, 0.1)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.log.close()
