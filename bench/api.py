"""API benchmark: 100,000 jobs in PostgreSQL, a real uvicorn server process.

Measures GET /v1/jobs?limit=50 (first page and a deep page) p50/p99,
POST /v1/jobs requests/s with 8 concurrent clients (local backend with no room
to run: jobs are stored and queued, never launched), and the API process's
resident memory. Run: .venv/bin/python bench/api.py [--jobs 100000]"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service import migrate  # noqa: E402
from service.demo import demo_template  # noqa: E402
from service import jobspec  # noqa: E402
from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.db import make_engine, make_session_factory  # noqa: E402
from service.pagination import encode_cursor  # noqa: E402

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
    now = datetime.now(timezone.utc)
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


async def measure_create(base: str, seconds: float, concurrency: int, proc: psutil.Process,
                         headers: dict) -> tuple[float, int, float]:
    done = 0
    errors = 0
    peak_rss = 0.0
    stop = time.perf_counter() + seconds
    body = {"template": "mwms-demo", "parameters": {"epochs": 3}, "labels": {"team": "vision"}}

    async def client():
        nonlocal done, errors
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=headers) as c:
            while time.perf_counter() < stop:
                r = await c.post("/v1/jobs", json=body)
                if r.status_code == 201:
                    done += 1
                else:
                    errors += 1

    async def sample():
        nonlocal peak_rss
        while time.perf_counter() < stop:
            peak_rss = max(peak_rss, proc.memory_info().rss / 2**20)
            await asyncio.sleep(0.2)

    t0 = time.perf_counter()
    await asyncio.gather(sample(), *(client() for _ in range(concurrency)))
    return done / (time.perf_counter() - t0), errors, peak_rss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--concurrency", type=int, default=8)
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

    port = free_port()
    work = tempfile.mkdtemp(prefix="trainjobs-bench-")
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": sa_url, "TRAINJOBS_BACKENDS": '["local"]',
           "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "0", "TRAINJOBS_LOCAL_WORK_DIR": work,
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", **({"TRAINJOBS_RUN_RECONCILER": "false"} if os.environ.get("NORECON") else {})}
    server = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                               "--log-level", "warning"], env=env, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        proc = psutil.Process(server.pid)
        idle_rss = proc.memory_info().rss / 2**20

        first = measure_list(base, {"limit": 50}, args.requests, headers)
        keys.sort(reverse=True)
        deep_at = keys[int(len(keys) * 0.9)]
        deep = measure_list(base, {"limit": 50, "cursor": encode_cursor(deep_at[0].isoformat(), deep_at[1])},
                            args.requests, headers)
        filtered = measure_list(base, {"limit": 50, "label": "team=vision", "state": "SUCCEEDED"}, args.requests,
                                headers)
        rate, errors, peak_rss = asyncio.run(measure_create(base, args.seconds, args.concurrency, proc, headers))
        after = measure_list(base, {"limit": 50}, args.requests // 2, headers)
    finally:
        server.terminate()
        server.wait(30)

    rows = [
        ("GET /v1/jobs?limit=50 first page p50 / p99", f"{percentile(first, 50):.1f} / {percentile(first, 99):.1f} ms", "p99 <= 30 ms"),
        ("GET /v1/jobs?limit=50 deep page (90%) p50 / p99", f"{percentile(deep, 50):.1f} / {percentile(deep, 99):.1f} ms", "p99 <= 30 ms"),
        ("GET /v1/jobs label+state filter p50 / p99", f"{percentile(filtered, 50):.1f} / {percentile(filtered, 99):.1f} ms", ""),
        ("GET first page after the create run p50 / p99", f"{percentile(after, 50):.1f} / {percentile(after, 99):.1f} ms", ""),
        (f"POST /v1/jobs, {args.concurrency} concurrent clients", f"{rate:.0f} req/s ({errors} errors)", ">= 200 req/s"),
        ("API process RSS idle / peak under load", f"{idle_rss:.0f} / {peak_rss:.0f} MB", "<= 250 MB"),
    ]
    print(f"\nbench/api.py: {args.jobs} jobs in PostgreSQL, {os.cpu_count()} cores\n")
    print("| measure | result | target |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
