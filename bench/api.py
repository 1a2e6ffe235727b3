"""API benchmark: 100,000 jobs in PostgreSQL, a real uvicorn server process.

Measures GET /v1/jobs?limit=50 (first page and a deep page) p50/p99,
POST /v1/jobs requests/s with 8 concurrent connections (local backend with no
room to run: jobs are stored and queued, never launched), and the resident
memory of the API processes, for `serve --workers 1` and `--workers 2`.
The POST load comes from wrk when it is installed (apt-get install wrk), else
from an httpx client in this process, which itself takes much of a core.
Run: .venv/bin/python bench/api.py [--jobs 100000] [--workers 1 2]"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service import jobspec  # noqa: E402
from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.core.pagination import encode_cursor  # noqa: E402
from service.demo import demo_template  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402

ADMIN = os.environ.get("TRAINJOBS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
DB = "trainjobs_bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed(url_psycopg: str, n: int) -> list[tuple[datetime, uuid.UUID]]:
    demo = demo_template()
    spec = demo.spec.model_dump(mode="json", exclude_none=True)
    params = [p.model_dump(mode="json", exclude_none=True) for p in demo.parameters]
    template_id = uuid.uuid4()
    now = datetime.now(UTC)
    keys = []
    with psycopg.connect(url_psycopg) as conn:
        team_id = conn.execute("SELECT id FROM teams WHERE name = 'bench'").fetchone()[0]
        conn.execute("INSERT INTO templates (id, team_id, name, latest_version, created_at, updated_at) "
                     "VALUES (%s, %s, %s, 1, %s, %s)", (template_id, team_id, demo.name, now, now))
        conn.execute("INSERT INTO template_versions (id, template_id, version, description, spec, parameters, "
                     "created_at, created_by) VALUES (%s, %s, 1, '', %s, %s, %s, 'bench')",
                     (uuid.uuid4(), template_id, json.dumps(spec), json.dumps(params), now))
        states = ["SUCCEEDED"] * 8 + ["FAILED", "CANCELLED"]
        teams = ["vision", "nlp", "speech", "ads"]
        rng = random.Random(7)
        # Compile once per variant; each row then differs only in its name and id label.
        variants = [jobspec.build(spec, params, {"epochs": 3}, None, display_name="bench",
                                  labels={"team": t}, reserved_labels={"trainjobs-job-id": str(uuid.UUID(int=0))}
                                  )[1].to_json() for t in teams]
        jobs, labels, events = io.StringIO(), io.StringIO(), io.StringIO()
        for i in range(n):
            jid = uuid.uuid4()
            created = now - timedelta(days=100) + timedelta(seconds=i * 86.4)
            compiled = dict(variants[i % 4])
            compiled["custom_job"] = {**compiled["custom_job"], "displayName": f"bench-{i}",
                                      "labels": {"team": teams[i % 4], "trainjobs-job-id": str(jid)}}
            state = rng.choice(states)
            row = [str(jid), str(team_id), f"bench-{i}", str(template_id), demo.name, "1", "local", state,
                   json.dumps({"epochs": 1 + i % 20}), "null", json.dumps({"team": teams[i % 4]}),
                   json.dumps(compiled), "\\N", "\\N", "\\N", "\\N", "bench",
                   created.isoformat(), created.isoformat(), created.isoformat(),
                   (created + timedelta(minutes=30)).isoformat()]
            jobs.write("\t".join(r.replace("\\", "\\\\") if r != "\\N" else r for r in row) + "\n")
            labels.write(f"{jid}\tteam\t{teams[i % 4]}\n")
            events.write(f"{jid}\t\\N\tQUEUED\tsubmitted\tbench\t{created.isoformat()}\n")
            keys.append((created, jid))
        cols = ("id, team_id, display_name, template_id, template_name, template_version, backend, state, parameters, "
                "overrides, labels, compiled, backend_ref, console_url, error, progress, created_by, created_at, "
                "updated_at, started_at, ended_at")
        with conn.cursor() as cur:
            with cur.copy(f"COPY jobs ({cols}) FROM STDIN") as cp:
                cp.write(jobs.getvalue())
            with cur.copy("COPY job_labels (job_id, key, value) FROM STDIN") as cp:
                cp.write(labels.getvalue())
            with cur.copy("COPY job_events (job_id, from_state, to_state, reason, actor, at) FROM STDIN") as cp:
                cp.write(events.getvalue())
        conn.execute("ANALYZE")
    return keys


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def measure_list(base: str, params: dict, n: int, headers: dict) -> list[float]:
    out = []
    with httpx.Client(base_url=base, timeout=30, headers=headers) as c:
        for _ in range(20):  # warm-up
            c.get("/v1/jobs", params=params).raise_for_status()
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.get("/v1/jobs", params=params)
            out.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200 and len(r.json()["items"]) == 50, r.text
    return out


def measure_create_wrk(base: str, seconds: float, concurrency: int, headers: dict, body: dict) -> tuple[float, int]:
    """wrk (C) as the load: a Python client would take much of the 2 cores it measures."""
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(f"wrk.method = 'POST'\nwrk.body = {json.dumps(json.dumps(body))}\n"
                 f"wrk.headers['Content-Type'] = 'application/json'\n"
                 f"wrk.headers['Authorization'] = '{headers['Authorization']}'\n")
    script.close()
    out = subprocess.run(["wrk", "-t2", f"-c{concurrency}", f"-d{int(seconds)}s", "-s", script.name,
                          f"{base}/v1/jobs"], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    return rate, errors


async def measure_create_httpx(base: str, seconds: float, concurrency: int, headers: dict,
                               body: dict) -> tuple[float, int]:
    done = errors = 0
    stop = time.perf_counter() + seconds

    async def client():
        nonlocal done, errors
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=headers) as c:
            while time.perf_counter() < stop:
                r = await c.post("/v1/jobs", json=body)
                done, errors = (done + 1, errors) if r.status_code == 201 else (done, errors + 1)

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return done / (time.perf_counter() - t0), errors


def api_processes(server: psutil.Process, workers: int) -> list[psutil.Process]:
    """The processes that serve requests: the server itself, or its worker children."""
    if workers == 1:
        return [server]
    return [c for c in server.children() if "multiprocessing" in " ".join(c.cmdline())
            and "resource_tracker" not in " ".join(c.cmdline())]


def sample_rss(procs: list[psutil.Process], stop: threading.Event, peak: list[float]) -> None:
    while not stop.wait(0.2):
        try:
            rss = [p.memory_info().rss / 2**20 for p in procs]
        except psutil.Error:
            continue
        peak[0] = max(peak[0], max(rss))
        peak[1] = max(peak[1], sum(rss))


def run_server(sa_url: str, workers: int, args, headers: dict, keys) -> dict:
    port = free_port()
    work = tempfile.mkdtemp(prefix="trainjobs-bench-")
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": sa_url, "TRAINJOBS_BACKENDS": '["local"]',
           "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "0", "TRAINJOBS_LOCAL_WORK_DIR": work,
           "TRAINJOBS_CONTROLLER_LOCK_PATH": os.path.join(work, "controller.lock"),
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false"}
    server = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                               "--workers", str(workers), "--log-level", "warning"], env=env, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    out = {}
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        time.sleep(2)  # every worker up
        procs = api_processes(psutil.Process(server.pid), workers)
        out["idle_rss"] = max(p.memory_info().rss for p in procs) / 2**20
        out["first"] = measure_list(base, {"limit": 50}, args.requests, headers)
        deep_at = keys[int(len(keys) * 0.9)]
        out["deep"] = measure_list(base, {"limit": 50, "cursor": encode_cursor(deep_at[0].isoformat(), deep_at[1])},
                                   args.requests, headers)
        out["filtered"] = measure_list(base, {"limit": 50, "label": "team=vision", "state": "SUCCEEDED"},
                                       args.requests, headers)
        body = {"template": "mwms-demo", "parameters": {"epochs": 3}, "labels": {"team": "vision"}}
        peak = [0.0, 0.0]
        stop = threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(procs, stop, peak))
        sampler.start()
        if shutil.which("wrk"):
            out["loadgen"] = "wrk"
            out["rate"], out["errors"] = measure_create_wrk(base, args.seconds, args.concurrency, headers, body)
        else:
            out["loadgen"] = "httpx"
            out["rate"], out["errors"] = asyncio.run(
                measure_create_httpx(base, args.seconds, args.concurrency, headers, body))
        stop.set()
        sampler.join()
        out["peak_rss"], out["peak_total"] = peak
        out["processes"] = len(procs)
        out["after"] = measure_list(base, {"limit": 50}, args.requests // 2, headers)
    finally:
        server.terminate()
        server.wait(60)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="serve --workers values to measure")
    args = ap.parse_args()

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    base_url = ADMIN.rsplit("/", 1)[0]
    sa_url = base_url.replace("postgresql://", "postgresql+psycopg://") + "/" + DB
    migrate.upgrade(sa_url)
    engine = make_engine(sa_url)
    with make_session_factory(engine)() as session:
        _, secret = create_token(session, get_or_create_team(session, "bench"), "bench", "member", "bench")
        session.commit()
    engine.dispose()
    headers = {"Authorization": f"Bearer {secret}"}
    t0 = time.perf_counter()
    keys = seed(f"{base_url}/{DB}", args.jobs)
    print(f"seeded {args.jobs} jobs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    keys.sort(reverse=True)
    results = {w: run_server(sa_url, w, args, headers, keys) for w in args.workers}

    def pct(v):
        return f"{percentile(v, 50):.1f} / {percentile(v, 99):.1f} ms"

    print(f"\nbench/api.py: {args.jobs} jobs in PostgreSQL, {os.cpu_count()} cores, "
          f"POST load from {results[args.workers[0]]['loadgen']} with {args.concurrency} connections\n")
    print("| measure | " + " | ".join(f"{w} worker{'s' if w > 1 else ''}" for w in args.workers) + " | target |")
    print("|---|" + "---|" * len(args.workers) + "---|")
    rows = [
        ("GET /v1/jobs?limit=50 first page p50 / p99", lambda r: pct(r["first"]), "p99 <= 30 ms"),
        ("GET /v1/jobs?limit=50 deep page (90% in) p50 / p99", lambda r: pct(r["deep"]), "p99 <= 30 ms"),
        ("GET /v1/jobs label+state filter p50 / p99", lambda r: pct(r["filtered"]), ""),
        ("GET first page after the POST run p50 / p99", lambda r: pct(r["after"]), ""),
        ("POST /v1/jobs req/s (errors)", lambda r: f"{r['rate']:.0f} ({r['errors']})", ">= 200 req/s"),
        ("RSS per API process, idle / peak", lambda r: f"{r['idle_rss']:.0f} / {r['peak_rss']:.0f} MB", "<= 250 MB"),
        ("RSS of all API processes, peak", lambda r: f"{r['peak_total']:.0f} MB ({r['processes']})", ""),
    ]
    for name, fn, target in rows:
        print(f"| {name} | " + " | ".join(fn(results[w]) for w in args.workers) + f" | {target} |")


if __name__ == "__main__":
    main()
