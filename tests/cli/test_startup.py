"""What a newcomer sees when `trainjobs serve` starts, as a real subprocess: the UI and docs
URLs on the real port, a banner whose examples use that port, no Alembic chatter at INFO,
readable lines on a terminal, and a refusal to start as one line with its fix."""
import io
import logging
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.core.logging_setup import TextFormatter, resolved_log_format
from tests.servekit import free_port

ROOT = Path(__file__).resolve().parents[2]
WAIT = 90  # seconds: the most a start may take on a busy machine; reached only when it fails


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TRAINJOBS_") or k.startswith("TRAINJOBS_LOCAL_REPLICA_UID_")}
    env.update(TRAINJOBS_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", TRAINJOBS_LOCAL_WORK_DIR=str(
        tmp_path / "runs"), TRAINJOBS_SEED_DEMO_TEMPLATE="false", PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def read_until(proc: subprocess.Popen, fd: int, marker: str) -> str:
    """The process's output until `marker` appears (or it exits, or WAIT passes)."""
    out, deadline = b"", time.monotonic() + WAIT
    while marker.encode() not in out:
        left = deadline - time.monotonic()
        assert left > 0 and proc.poll() is None, out.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a pty's other end closed
                chunk = b""
            assert chunk, out.decode(errors="replace")
            out += chunk
    return out.decode(errors="replace")


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(WAIT)


def test_serve_prints_the_ui_and_docs_urls_on_its_port_and_no_alembic_lines(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port)],
                            env=env_for(tmp_path), cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        out = read_until(proc, proc.stderr.fileno(), "Ctrl-C")
    finally:
        code = stop(proc)
    url = f"http://127.0.0.1:{port}"
    assert f"curl -H \"Authorization: Bearer $TRAINJOBS_TOKEN\" {url}/v1/templates" in out
    assert ":8000" not in out
    assert f"web UI:   {url}/ui" in out and f"API docs: {url}/docs" in out
    assert "trainjobs tokens create --team default --role admin" in out  # what to do with a lost token
    assert "alembic" not in out.lower() and "Running upgrade" not in out, out
    assert code == 130


def test_serve_on_port_0_prints_the_port_it_bound(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", "0"],
                            env=env_for(tmp_path), cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        out = read_until(proc, proc.stderr.fileno(), "Ctrl-C")
    finally:
        stop(proc)
    port = int(re.search(r"web UI:   http://127\.0\.0\.1:(\d+)/ui", out).group(1))
    assert port != 0


def test_on_a_terminal_lines_are_text_and_alembic_speaks_only_at_debug(tmp_path):
    def prepare(level: str) -> str:
        main, sub = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "prepare"], cwd=tmp_path,
                                env=env_for(tmp_path / level, TRAINJOBS_LOG_LEVEL=level),
                                stdin=subprocess.DEVNULL, stdout=sub, stderr=sub)
        os.close(sub)
        try:
            return read_until(proc, main, "Lost it?")
        finally:
            assert proc.wait(WAIT) == 0
            os.close(main)

    (tmp_path / "INFO").mkdir()
    (tmp_path / "DEBUG").mkdir()
    quiet = prepare("INFO")
    assert "alembic" not in quiet
    chatty = prepare("DEBUG")
    migration = [ln for ln in chatty.splitlines() if "alembic" in ln]
    assert migration and not [ln for ln in migration if ln.lstrip().startswith("{")], migration
    assert re.search(r"\d\d:\d\d:\d\d INFO +alembic\.runtime\.migration: Running upgrade", chatty), chatty


def test_the_log_format_follows_the_stream_unless_set():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert resolved_log_format("auto", Tty()) == "text"
    assert resolved_log_format("auto", io.StringIO()) == "json"
    assert resolved_log_format("json", Tty()) == "json"
    assert resolved_log_format("text", io.StringIO()) == "text"
    record = logging.makeLogRecord({"name": "trainjobs.access", "levelname": "INFO", "msg": "request",
                                    "method": "POST", "route": "/v1/jobs", "status": 201, "color_message": "x"})
    line = TextFormatter().format(record)
    assert re.fullmatch(r"\d\d:\d\d:\d\d INFO    trainjobs\.access: request method=POST route=/v1/jobs status=201",
                        line), line


def refusal(tmp_path, **env) -> str:
    done = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", str(free_port())],
                          env=env_for(tmp_path, **env), cwd=tmp_path, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("trainjobs: refusing to start: ")
    return lines[0]


def test_a_database_that_does_not_answer_is_one_line(tmp_path):
    line = refusal(tmp_path, TRAINJOBS_DATABASE_URL=f"postgresql+psycopg://postgres:pw@127.0.0.1:{free_port()}/x")
    assert "does not answer" in line and "TRAINJOBS_DATABASE_URL" in line
    assert ":pw@" not in line  # the password is left out


def test_a_bad_setting_is_one_line_naming_it(tmp_path):
    line = refusal(tmp_path, TRAINJOBS_LOG_FORMAT="xml")
    assert "TRAINJOBS_LOG_FORMAT='xml'" in line and "'auto', 'json' or 'text'" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="replicas run as other uids only when the service is root")
def test_a_run_folder_others_cannot_reach_is_one_line(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    line = refusal(tmp_path, TRAINJOBS_LOCAL_WORK_DIR=str(closed / "runs"))
    assert f"{closed} is not searchable by others" in line and "chmod o+x" in line


def test_the_demo_line_says_what_it_runs_on_slurm():
    """Slurm runs no image: the demo runs the trainer with TRAINJOBS_SLURM_PYTHON there, 4 CPUs a task."""
    from service.cli.main import _demo_runs
    from service.slices import Settings
    only = _demo_runs(Settings(database_url="sqlite://", backends=["slurm"], default_backend="slurm",
                               slurm_python="/envs/tf/bin/python"))
    assert "trainjobs-trainer" not in only and "TRAINJOBS_SLURM_PYTHON=/envs/tf/bin/python" in only, only
    assert "TRAINJOBS_SLURM_CPUS_PER_TASK" in only
    both = _demo_runs(Settings(database_url="sqlite://", backends=["local", "slurm"], default_backend="local"))
    assert both.startswith("runs trainjobs-trainer:latest (local); on slurm: python -m trainer.task"), both
    assert _demo_runs(Settings(database_url="sqlite://", backends=["local"], default_backend="local")) == \
        "runs trainjobs-trainer:latest"


def test_a_client_command_loads_no_server_stack(tmp_path):
    """`trainjobs jobs ...` talks HTTP: it must not import the web framework, the metrics or the
    database layer to set up its logging (it did: ~1.5 s of CPU on every call)."""
    code = ("import sys\nfrom service.cli.main import main\n"
            "rc = main(['jobs', 'list', '--url', 'http://127.0.0.1:9'])\n"
            "print(rc, sorted(m for m in ('fastapi', 'starlette', 'prometheus_client', 'sqlalchemy', 'uvicorn')"
            " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], env=env_for(tmp_path), capture_output=True, text=True,
                       timeout=WAIT)
    rc, _, loaded = r.stdout.strip().partition(" ")
    assert rc != "0" and "127.0.0.1:9" in r.stderr, r.stdout + r.stderr   # it really ran: no service there
    assert loaded == "[]", loaded
