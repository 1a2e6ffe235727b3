"""POST /v1/jobs, two checkouts and the floor alternated on one host: req/s and the server's CPU
per request for each, round after round, so that the host's drift (the floor itself moves by a
third within minutes on a shared VM) hits every contender alike.

Each checkout is served as `trainjobs serve` with its own code on the import path
(PYTHONPATH), this checkout's .venv, a database of its own and the local backend holding the
jobs QUEUED (as ../shared/bench/post_vs_floor.sh); the floor is ../shared/bench/floor_app.py.
Each round runs `wrk -t2 -c8 -d<seconds>s` against each in turn and reads the server's CPU
time from /proc. Needs wrk and PostgreSQL on 127.0.0.1:5432.

Run: .venv/bin/python bench/ab_submit.py OLD_CHECKOUT [NEW_CHECKOUT (default: here)]
     [--rounds 5] [--seconds 8] [--no-floor]
e.g. git worktree add /tmp/old <commit>; .venv/bin/python bench/ab_submit.py /tmp/old"""
from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
FLOOR = ROOT.parent / "shared" / "bench"
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
BODY = '{"template": "mwms-demo", "parameters": {"epochs": 3}}'


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in time")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Contender:
    def __init__(self, name: str, argv: list[str], env: dict, cwd: str, token: str | None, db: str) -> None:
        self.name, self.port, self.db, self.rounds = name, _port(), db, []
        self.log = Path(cwd) / f"{name}.log"
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{db}"
        env = {**os.environ, **env, "TRAINJOBS_DATABASE_URL": url, "FLOOR_DB": url}
        self.proc = subprocess.Popen([*argv, "--port", str(self.port)], env=env, cwd=cwd,
                                     stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        self.token = token
        self.lua = Path(cwd) / f"{name}.lua"

    def ready(self, health: str) -> None:
        _wait(f"http://127.0.0.1:{self.port}{health}", time.monotonic() + 90)
        if self.token is None:    # a trainjobs server prints its first admin token on first start
            found = re.search(r"tj_[A-Za-z0-9_-]+", self.log.read_text())
            if not found:
                raise SystemExit(f"{self.name}: no admin token in its first-start output")
            self.token = found.group(0)
        self.lua.write_text(f"wrk.method = 'POST'; wrk.body = '{BODY}'\n"
                            "wrk.headers['Content-Type'] = 'application/json'\n"
                            f"wrk.headers['Authorization'] = 'Bearer {self.token}'\n")

    def round(self, seconds: int) -> tuple[float, float]:
        c0 = _cpu(self.proc.pid)
        out = subprocess.run(["wrk", "-t2", "-c8", f"-d{seconds}s", "-s", str(self.lua),
                              f"http://127.0.0.1:{self.port}/v1/jobs"], capture_output=True, text=True,
                             timeout=seconds + 60).stdout
        cpu = _cpu(self.proc.pid) - c0
        n = int(re.search(r"(\d+) requests in", out).group(1))
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if non2xx:
            raise SystemExit(f"{self.name}: {non2xx.group(1)} answers were not 2xx")
        self.rounds.append((rps, cpu / n * 1000))
        return self.rounds[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=str(ROOT))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--no-floor", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp()
    os.chmod(work, 0o711)   # local replicas (never started: no launch slot) would pass through it
    tag = uuid.uuid4().hex[:8]
    contenders: list[Contender] = []
    try:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            for name in ("new", "old", "floor"):
                conn.execute(f'CREATE DATABASE "ab_{name}_{tag}"')
        serve = [str(PY), "-m", "service.cli", "serve", "--host", "127.0.0.1"]
        for name, checkout in (("new", args.new), ("old", args.old)):
            env = {"PYTHONPATH": str(Path(checkout).resolve()), "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "0",
                   "TRAINJOBS_LOG_LEVEL": "WARNING"}
            contenders.append(Contender(name, serve, env, work, None, f"ab_{name}_{tag}"))
        if not args.no_floor:
            contenders.append(Contender("floor", [str(PY), "-m", "uvicorn", "floor_app:app", "--host", "127.0.0.1",
                                                  "--log-level", "warning"], {"PYTHONPATH": str(FLOOR)}, work,
                                        "floor-token", f"ab_floor_{tag}"))
        for c in contenders:
            c.ready("/docs" if c.name == "floor" else "/healthz")
        for r in range(args.rounds):
            for c in contenders:
                rps, ms = c.round(args.seconds)
                print(f"round {r + 1} {c.name:<5} {rps:7.1f} req/s {ms:5.2f} ms CPU/request", flush=True)
        for c in contenders:
            print(f"{c.name:<5} median {statistics.median(x for x, _ in c.rounds):7.1f} req/s "
                  f"{statistics.median(y for _, y in c.rounds):5.2f} ms CPU/request")
    finally:
        for c in contenders:
            c.proc.terminate()
        for c in contenders:
            try:
                c.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                c.proc.kill()
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            for name in ("new", "old", "floor"):
                conn.execute(f'DROP DATABASE IF EXISTS "ab_{name}_{tag}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
