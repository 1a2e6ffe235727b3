"""POST /v1/jobs with one worker against the floor of this stack (bench/floor_app.py:
FastAPI + SQLAlchemy Core + psycopg, token lookup, a job row with a ~6 KB JSON document
and an event row, commit), in the same run, with the same client: wrk -t2 -c8, rounds
alternating trainjobs / floor, so both see the same machine (2 shared cores here).

Prints, per round and as medians: requests/s, and the server process's CPU time per
request (from /proc, so it holds even when other work shares the machine), and the
ratio trainjobs / floor of both. trainjobs runs as `trainjobs serve` on PostgreSQL with
the local backend holding every job queued (LOCAL_MAX_RUNNING_JOBS=0): stored, never launched.
Run: .venv/bin/python bench/submit_vs_floor.py [--rounds 3] [--seconds 8] [--profile DIR]
(needs wrk: apt-get install wrk; --profile DIR also records a py-spy flame graph of each
server during one extra run, if py-spy is on PATH)."""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
ADMIN = os.environ.get("TRAINJOBS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BODY = {"template": "mwms-demo", "parameters": {"epochs": 3}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, log: Path) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"{url}: the server exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    sys.exit(f"{url}: not ready in 60 s")


def wrk(base: str, token: str, seconds: int, work: Path) -> tuple[int, float, int]:
    """(requests, requests/s, non-2xx) of one wrk -t2 -c8 run of POST /v1/jobs."""
    script = work / f"post-{secrets.token_hex(4)}.lua"
    script.write_text(f"wrk.method = 'POST'\nwrk.body = {json.dumps(json.dumps(BODY))}\n"
                      "wrk.headers['Content-Type'] = 'application/json'\n"
                      f"wrk.headers['Authorization'] = 'Bearer {token}'\n")
    out = subprocess.run(["wrk", "-t2", "-c8", f"-d{seconds}s", "-s", str(script), f"{base}/v1/jobs"],
                         capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    return total, rate, bad


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--profile", type=Path, help="write py-spy flame graphs (svg) of both servers here")
    ap.add_argument("--raw", action="store_true", help="with --profile: py-spy's collapsed stacks, not svg")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("needs wrk: apt-get install wrk")
    work = Path(tempfile.mkdtemp(prefix="trainjobs-submit-bench-"))
    os.chmod(work, 0o711)  # local replicas (never started here) would pass through as other uids
    db = f"trainjobs_submit_bench_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + db
    token = "tj_" + secrets.token_urlsafe(32)
    procs: list[subprocess.Popen] = []
    try:
        tj_port, fl_port = free_port(), free_port()
        env = {**os.environ, "TRAINJOBS_DATABASE_URL": url, "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "0",
               "TRAINJOBS_LOCAL_WORK_DIR": str(work / "runs"), "TRAINJOBS_LOG_LEVEL": "WARNING",
               "TRAINJOBS_BOOTSTRAP_TOKEN": token}
        tj_log, fl_log = work / "trainjobs.log", work / "floor.log"
        tj = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1",
                               "--port", str(tj_port)], env=env, cwd=work,
                              stdout=tj_log.open("w"), stderr=subprocess.STDOUT)
        procs.append(tj)
        fl = subprocess.Popen([sys.executable, "-m", "uvicorn", "floor_app:app", "--host", "127.0.0.1",
                               "--port", str(fl_port), "--log-level", "warning"],
                              env={**os.environ, "FLOOR_DB": url}, cwd=ROOT / "bench",
                              stdout=fl_log.open("w"), stderr=subprocess.STDOUT)
        procs.append(fl)
        wait_ready(f"http://127.0.0.1:{tj_port}/readyz", tj, tj_log)
        wait_ready(f"http://127.0.0.1:{fl_port}/docs", fl, fl_log)
        servers = {"trainjobs": (f"http://127.0.0.1:{tj_port}", token, psutil.Process(tj.pid)),
                   "floor": (f"http://127.0.0.1:{fl_port}", "floor-token", psutil.Process(fl.pid))}
        for name, (base, tok, _) in servers.items():  # warm: imports, caches, prepared statements
            r = httpx.post(f"{base}/v1/jobs", json=BODY, headers={"Authorization": f"Bearer {tok}"}, timeout=30)
            assert r.status_code == 201, (name, r.status_code, r.text)
            wrk(base, tok, 2, work)

        results: dict[str, list[tuple[float, float]]] = {"trainjobs": [], "floor": []}
        for i in range(args.rounds):
            for name, (base, tok, proc) in servers.items():
                before = cpu_seconds(proc)
                total, rate, bad = wrk(base, tok, args.seconds, work)
                cpu_ms = (cpu_seconds(proc) - before) / max(total, 1) * 1000
                results[name].append((rate, cpu_ms))
                print(f"round {i + 1} {name:9s} {rate:7.1f} req/s  {cpu_ms:5.2f} ms CPU/request"
                      + (f"  ({bad} non-2xx!)" if bad else ""), flush=True)
                if bad:
                    sys.exit(f"{name}: {bad} responses other than 2xx")
        tj_rate = statistics.median(r for r, _ in results["trainjobs"])
        fl_rate = statistics.median(r for r, _ in results["floor"])
        tj_cpu = statistics.median(c for _, c in results["trainjobs"])
        fl_cpu = statistics.median(c for _, c in results["floor"])
        print(f"\nmedians: trainjobs {tj_rate:.0f} req/s ({tj_cpu:.2f} ms CPU/request), "
              f"floor {fl_rate:.0f} req/s ({fl_cpu:.2f} ms CPU/request)")
        print(f"ratio trainjobs/floor: {tj_rate / fl_rate:.2f} by req/s (target >= 0.5), "
              f"{fl_cpu / tj_cpu:.2f} by CPU per request")

        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            for name, (base, tok, proc) in servers.items():
                svg = args.profile / f"{name}.{'txt' if args.raw else 'svg'}"
                spy = subprocess.Popen(["py-spy", "record", "-p", str(proc.pid), "-o", str(svg), "-r", "250",
                                        *(["--format", "raw"] if args.raw else []),
                                        "-d", str(args.seconds), "--threads",
                                        # --gil: only the thread holding the GIL, i.e. Python CPU time
                                        # (without it, threads blocked in libpq count as busy).
                                        "--gil"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
                wrk(base, tok, args.seconds - 2, work)
                spy.wait()
                print(f"py-spy profile: {svg}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
