"""A follower survives a restart of the service (issue 25, point 2): `jobs logs -f` and
`jobs wait` are running when the service is killed (SIGKILL, a real process); a new one
starts on the same port and database; the follower says it is reconnecting, resumes after
the last line it printed (Last-Event-ID), and prints every line exactly once."""
from __future__ import annotations

import subprocess
import sys
import threading

from tests.backends.localkit import PROGRAM, kill_all
from tests.cli.conftest import cli_env
from tests.servekit import TOKEN, Serve, wait_state
from tests.waiting import wait_for

BEFORE, AFTER = 5, 8
TEMPLATE = {"name": "gated", "spec": {
    "container": {"image_uri": "trainjobs-test:1", "command": ["python", str(PROGRAM)]},
    "chief": {"container": {"args": ["--lines", str(BEFORE), "--wait-file", "${gate}",
                                     "--lines-after", str(AFTER)]}}},
    "parameters": [{"name": "gate", "type": "string"}]}


class Collect(threading.Thread):
    """Reads one pipe of a process line by line, so a test can wait for a line."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe, self.lines = pipe, []

    def run(self) -> None:
        for line in self.pipe:
            self.lines.append(line.rstrip("\n"))


def test_logs_follow_and_wait_ride_out_a_restart(tmp_path):
    env = {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOCAL_WORK_DIR": str(tmp_path / "runs")}
    first = Serve(tmp_path / "one", env).ready()
    second = None
    followers: list[subprocess.Popen] = []
    try:
        assert first.client.post("/v1/templates", json=TEMPLATE).status_code == 201
        wait_for(lambda: first.client.get("/v1/templates/gated").status_code == 200, "the template")
        gate = tmp_path / "gate"
        job = first.client.post("/v1/jobs", json={"template": "gated", "parameters": {"gate": str(gate)},
                                                  "display_name": "restart-me"}).json()
        cli = cli_env(tmp_path, TRAINJOBS_URL=first.url, TRAINJOBS_TOKEN=TOKEN, TRAINJOBS_RECONNECT_SECONDS="120")

        def start(*args: str) -> tuple[subprocess.Popen, Collect, Collect]:
            proc = subprocess.Popen([sys.executable, "-m", "service.cli", *args], env=cli, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            followers.append(proc)
            out, err = Collect(proc.stdout), Collect(proc.stderr)
            out.start()
            err.start()
            return proc, out, err

        logs, out, err = start("jobs", "logs", "restart-me", "-f")
        waiter, _, wait_err = start("jobs", "wait", job["id"])
        wait_for(lambda: len(out.lines) >= 1 + BEFORE, "the lines before the gate", 90)

        first.kill9()
        # The service stays away until both have noticed (the waiter polls at most 5 s apart).
        wait_for(lambda: any("reconnecting" in ln for ln in err.lines), "the follower to say it reconnects", 60)
        wait_for(lambda: any("reconnecting" in ln for ln in wait_err.lines), "the waiter to say it reconnects", 60)
        gate.touch()  # the replica prints the rest while no service runs
        second = Serve(tmp_path / "two", env, port=first.port).ready()
        wait_state(second.client, job["id"], "SUCCEEDED")

        assert logs.wait(120) == 0, err.lines
        assert waiter.wait(120) == 0, wait_err.lines
        expected = ["[workerpool0-0] hello from workerpool0-0 as chief:0"] + \
            [f"[workerpool0-0] workerpool0-0 line {i}" for i in range(BEFORE)] + \
            [f"[workerpool0-0] workerpool0-0 after {i}" for i in range(AFTER)]
        assert out.lines == expected  # each line once, in order: nothing lost, nothing repeated
        notes = "\n".join(err.lines)
        assert "reconnecting…" in notes and "reconnected after" in notes and "Traceback" not in notes
        assert "SUCCEEDED" in notes
        assert "SUCCEEDED" in "\n".join(wait_err.lines)
    finally:
        for proc in followers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        first.stop()
        if second is not None:
            second.stop()
        kill_all(tmp_path / "runs")


def test_a_follower_gives_up_after_its_reconnect_window(tmp_path):
    env = {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOCAL_WORK_DIR": str(tmp_path / "runs")}
    service = Serve(tmp_path / "one", env).ready()
    try:
        assert service.client.post("/v1/templates", json=TEMPLATE).status_code == 201
        wait_for(lambda: service.client.get("/v1/templates/gated").status_code == 200, "the template")
        job = service.client.post("/v1/jobs", json={"template": "gated",
                                                    "parameters": {"gate": str(tmp_path / "never")}}).json()
        cli = cli_env(tmp_path, TRAINJOBS_URL=service.url, TRAINJOBS_TOKEN=TOKEN, TRAINJOBS_RECONNECT_SECONDS="3")
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "jobs", "logs", job["id"], "-f"], env=cli,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = Collect(proc.stdout)
        out.start()
        wait_for(lambda: len(out.lines) >= 1 + BEFORE, "the lines before the gate", 90)
        service.kill9()
        assert proc.wait(60) == 3  # unreachable, after the window (3 s), not at once and not never
        stderr = proc.stderr.read()
        assert "reconnecting…" in stderr and "gave up after 3 s" in stderr and "TRAINJOBS_RECONNECT_SECONDS" in stderr
    finally:
        service.stop()
        kill_all(tmp_path / "runs")
    bad = subprocess.run([sys.executable, "-m", "service.cli", "jobs", "logs", job["id"], "-f"], text=True,
                         capture_output=True, env={**cli, "TRAINJOBS_RECONNECT_SECONDS": "forever"}, timeout=60)
    assert bad.returncode == 2 and "TRAINJOBS_RECONNECT_SECONDS='forever'" in bad.stderr
