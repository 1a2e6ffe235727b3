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
import tempfile
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

import psutil

from service.backends.local.processes import MARKER
from service.slices import Settings
from tests.waiting import wait_for

PROGRAM = Path(__file__).parent / "programs" / "replica.py"
TIMEOUT = 60.0
TESTS_TMP = Path(tempfile.gettempdir()) / "trainjobs-tests"  # generous: a busy 2-core machine


def settings_for(db_url: str, work_dir: Path, **overrides) -> Settings:
    values = dict(database_url=db_url, backends=["local"], default_backend="local", local_work_dir=work_dir,
                  local_cancel_grace_seconds=3.0, reconcile_interval_seconds=0.2, seed_demo_template=False,
                  # Replicas read gates and write dumps in the tests' folders (tests/conftest.py
                  # tmp_path), which their sandbox's private /tmp would hide.
                  local_sandbox_shared_dirs=[str(TESTS_TMP)])
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
    from service.persistence.models import utcnow

    _, compiled = jobspec.build(spec(chief_args), [], {}, None, display_name="t", labels={})
    return JobHandle(id=job_id, state=state, backend_ref=None, compiled=compiled, created_at=utcnow())


def run_path(job_or_ref) -> Path:
    """A local job's run folder, from its backend reference (`<host>:<path>`)."""
    ref = job_or_ref["backend_ref"] if isinstance(job_or_ref, dict) else job_or_ref
    host, _, path = ref.partition(":")
    assert host == socket.gethostname(), ref
    return Path(path)


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

    def run_path(self, job_id: str) -> Path:
        """A running local job's run folder, once the service has recorded where it is: the
        replica's logs are read from its files, so they can show before the launch's commit
        writes the job's backend reference."""
        def recorded():
            job = self.job(job_id)
            return job if job["backend_ref"] else None
        return run_path(wait_for(recorded, f"job {job_id}'s backend reference"))

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


def _job_of(p: psutil.Process, work_dir: str) -> str | None:
    """The job id a process was started for: a replica (and its children) by its marker
    variable, a wrapper or sandbox init (root, fixed environment) by the run folder in its
    arguments. None: not ours."""
    cmd = p.cmdline()
    if any(a.endswith(("/wrapper.py", "/nsholder.py")) for a in cmd[:4]):
        for a in cmd:
            if a.startswith(work_dir + "/"):
                return a[len(work_dir) + 1:].split("/", 1)[0]
        return None
    marker = p.environ().get(MARKER)
    return marker.split("/", 1)[0] if marker else None


def replica_processes(work_dir: Path, job_id: str | None = None, inits: bool = True) -> list[psutil.Process]:
    """Live processes started for runs under `work_dir` (sandbox inits unless `inits` is
    False, wrappers, commands, their children), or for one job of them."""
    try:
        ours = {p.name for p in Path(work_dir).iterdir()}
    except FileNotFoundError:
        return []
    top = str(Path(work_dir).resolve())
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            job = _job_of(p, top)
        except (psutil.Error, OSError):
            continue
        if job in ours and (job_id is None or job == job_id) and (inits or not _is_init(p)):
            found.append(p)
    return found


def _is_init(p: psutil.Process) -> bool:
    return any(a.endswith("/nsholder.py") for a in p.cmdline()[:4])


def job_processes(work_dir: Path, job_id: str, inits: bool = False) -> list[psutil.Process]:
    """A job's wrappers, replicas and their children; with `inits`, its sandbox's init too."""
    return replica_processes(work_dir, job_id, inits)


def assert_no_processes(work_dir: Path, job_id: str | None = None, timeout: float = TIMEOUT,
                        inits: bool = True) -> None:
    """No process of the job (of any job) left; with inits=False, its sandbox's init may be:
    it stays until a service stops it (e.g. while the service is down)."""
    find = (lambda: job_processes(work_dir, job_id, inits)) if job_id else (lambda: replica_processes(work_dir))
    wait_for(lambda: not find(), f"no replica process left ({find()})", timeout)


def kill_all(work_dir: Path) -> None:
    """Teardown: every process of the runs under `work_dir`, and their jobs' cgroups."""
    from service.backends.local import cgroup

    for p in replica_processes(work_dir):
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    try:
        names = [p.name for p in Path(work_dir).iterdir()]
    except FileNotFoundError:
        return
    for name in names:
        try:
            path = cgroup.path_of(uuid.UUID(name))
        except ValueError:
            continue
        if path is not None and path.exists():
            cgroup.kill_all(path)
            wait_for(lambda: not cgroup.members(path), f"cgroup {path} to empty", 10, 0.02)
            cgroup.remove(path)


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
        env = self.env_of(settings)
        self.log_path = Path(log_path)
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2])

    @staticmethod
    def env_of(settings: Settings) -> dict[str, str]:
        """This process's environment with `settings` as TRAINJOBS_* variables (and no others)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        for key, value in settings.model_dump().items():
            if value is not None:
                value = [str(v) for v in value] if isinstance(value, list) else value
                env[f"TRAINJOBS_{key.upper()}"] = json.dumps(value) if isinstance(value, (list, dict)) \
                    else str(value)
        return env

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
