"""`trainjobs serve` as real OS processes, so tests can start several on one database
(from different working directories), kill -9 one and watch another take over."""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "tj_" + secrets.token_urlsafe(32)   # TRAINJOBS_BOOTSTRAP_TOKEN: the first admin token
OPS_TOKEN = secrets.token_urlsafe(32)        # TRAINJOBS_METRICS_TOKEN: /readyz shows the pid with it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, cwd: Path, env: dict[str, str], *, workers: int = 1, name: str = "serve",
                 wrap: list[str] | None = None, log_level: str = "warning", port: int | None = None) -> None:
        """wrap: a command that runs the service (e.g. `ip netns exec <ns>`, tests/faults/netns.py);
        port: an earlier one's, to restart the service where its clients are."""
        cwd.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.workers, self.log_level = workers, log_level
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = cwd / f"{name}.log"
        # None of the test process's settings, but its replica uids (tests/conftest.py: one
        # range per test process, so concurrent runs never share a uid) and the tests' folders
        # that stay visible in local jobs' sandboxes.
        full = {k: v for k, v in os.environ.items()
                if not k.startswith("TRAINJOBS_") or k.startswith("TRAINJOBS_LOCAL_REPLICA_UID_")
                or k == "TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS"}
        full.update({"TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_LOG_FORMAT": "text",
                     "TRAINJOBS_BOOTSTRAP_TOKEN": TOKEN, "TRAINJOBS_METRICS_TOKEN": OPS_TOKEN,
                     "TRAINJOBS_RECONCILE_INTERVAL_SECONDS": "0.2", "PYTHONPATH": str(ROOT)})
        full.update(env)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*(wrap or []), sys.executable, "-m", "service.cli", "serve", "--port", str(self.port),
             "--workers", str(workers), "--log-level", log_level],
            env=full, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self, timeout: float = 120) -> Serve:
        def answers() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited with {self.proc.returncode}: {self.log()[-3000:]}")
            try:
                return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        def all_started() -> bool:
            # One worker answering is not all of them up; each logs its start-up at INFO.
            return self.log().count("Application startup complete") >= self.workers
        try:
            wait_for(answers, "serve to become ready", timeout, 0.1)
            if self.workers > 1 and self.log_level in ("info", "debug"):
                wait_for(all_started, f"all {self.workers} workers to start", timeout, 0.1)
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.log()[-3000:]}") from None
        return self

    def readyz(self) -> dict:
        # A new connection each time: with several workers it may land on any of them.
        return httpx.get(self.url + "/readyz", headers={"Authorization": f"Bearer {OPS_TOKEN}"}, timeout=5).json()

    def is_controller(self) -> bool:
        try:
            return bool(self.readyz().get("controller"))
        except httpx.HTTPError:
            return False

    def kill9(self) -> None:
        """SIGKILL the serve process alone (its local replicas live in sessions of their own)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self._log.close()


def wait_state(client: httpx.Client, job_id: str, *states: str, timeout: float = 90.0) -> dict:
    last = {}

    def reached():
        nonlocal last
        last = client.get(f"/v1/jobs/{job_id}").json()
        return last if last.get("state") in states else None
    try:
        return wait_for(reached, f"job {job_id} to reach {states}", timeout, 0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}; last: {last.get('state')} {last.get('error')}") from None
