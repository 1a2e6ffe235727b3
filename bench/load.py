"""The API under load (issue 11): one `trainjobs serve` process (1 worker) on PostgreSQL.

1. mix: 300 concurrent clients for 30 s, each looping GET /v1/jobs?limit=5,
   GET /v1/jobs/{id} and POST /v1/jobs (local backend holding jobs QUEUED). Every
   answer must be 2xx or 503 (backpressure); every 201 must match a stored row and no
   stored row may lack its 201. Prints counts, GET p50/p99 and /healthz p99 under load.
2. followers: one running local job printing LINES lines; FOLLOWERS SSE followers of it
   plus one sequential client doing GET /v1/jobs/{id}. Every follower must receive
   every line, in order, and the end event. Prints GET p50/p99, the service's CPU and
   how many reads of the log files the shared reader made.
3. memory: RSS of the service at idle, after the mix and with the followers attached.

The followers run in a process of their own, the GET client in this one: timed from the
followers' event loop, a GET would wait behind the client's own parsing of 200,000 events.
Run: .venv/bin/python bench/load.py [--clients 300] [--seconds 30] [--followers 1000] [--lines 200]
     [--only mix|followers] [--profile FILE.svg|FILE.txt]"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
ADMIN = os.environ.get("TRAINJOBS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
# The followers' process (--follower-process) is handed the token of the run that started it.
TOKEN = os.environ.get("TRAINJOBS_LOAD_TOKEN") or "tj_" + secrets.token_urlsafe(32)
# The by-route latency series are private (issue 22): the service is started with this metrics token.
METRICS_TOKEN = "bench-metrics-" + secrets.token_urlsafe(16)
METRICS_AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))


class Service:
    def __init__(self, db_url: str, work: Path, workers: int = 1, **env) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        full.update({"TRAINJOBS_DATABASE_URL": db_url, "TRAINJOBS_BOOTSTRAP_TOKEN": TOKEN,
                     "TRAINJOBS_SEED_DEMO_TEMPLATE": "true", "TRAINJOBS_LOG_LEVEL": "WARNING",
                     "TRAINJOBS_LOCAL_WORK_DIR": str(work / "runs"),
                     "TRAINJOBS_METRICS_TOKEN": METRICS_TOKEN, **env})
        self.log = open(work / "service.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(self.port),
                                      "--log-level", "warning", "--workers", str(workers)], env=full, cwd=work, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=raise_fd_limit)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit("the service did not start; see " + str(work / "service.log"))
        self.ps = psutil.Process(self.proc.pid)

    def _all(self) -> list:
        return [self.ps, *self.ps.children()]  # with --workers, the workers are its children

    def rss_mb(self) -> float:
        return sum(p.memory_info().rss for p in self._all()) / 2**20

    def cpu_seconds(self) -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in self._all()))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


H = {"Authorization": f"Bearer {TOKEN}"}


async def mix(url: str, clients: int, seconds: float) -> dict:
    statuses: dict[int, int] = {}
    created: set[str] = set()
    errors: list[str] = []
    get_lat: list[float] = []
    health_lat: list[float] = []
    seed_ids: list[str] = []
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, headers=H, timeout=60, limits=limits) as c:
        for _ in range(5):
            r = await c.post("/v1/jobs", json={"template": "mwms-demo"})
            created.add(r.json()["id"])
            seed_ids.append(r.json()["id"])
        stop = time.monotonic() + seconds

        async def one(i: int) -> None:
            n = 0
            while time.monotonic() < stop:
                n += 1
                kind = (i + n) % 3
                t0 = time.perf_counter()
                try:
                    if kind == 0:
                        r = await c.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 2}})
                    elif kind == 1:
                        r = await c.get("/v1/jobs", params={"limit": 5})
                    else:
                        r = await c.get(f"/v1/jobs/{seed_ids[n % len(seed_ids)]}")
                except httpx.HTTPError as e:
                    errors.append(f"{type(e).__name__} on {('POST', 'GET list', 'GET job')[kind]}")
                    continue
                dt = time.perf_counter() - t0
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if kind == 0 and r.status_code == 201:
                    created.add(r.json()["id"])
                elif kind != 0 and r.status_code == 200:
                    get_lat.append(dt)

        async def health() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=60) as hc:
                while time.monotonic() < stop:
                    t0 = time.perf_counter()
                    r = await hc.get("/healthz")
                    health_lat.append(time.perf_counter() - t0)
                    assert r.status_code == 200
                    await asyncio.sleep(0.2)
        await asyncio.gather(health(), *(one(i) for i in range(clients)))
    return {"statuses": statuses, "created": created, "errors": errors, "get": get_lat, "health": health_lat}


async def follower(port: int, job_id: str, token: str, expect: int, results: list, attached: list) -> None:
    """A bare SSE client (asyncio streams: thousands of them fit in one process) that behaves as
    the Python client does: a 503 is retried after its Retry-After (never earlier, spread over a
    quarter more), and a stream ended early (`resync`, `reconnect`) is resumed with Last-Event-ID."""
    lines: list[int] = []
    event, ended, status, last_id = None, False, None, None
    refused = resumed = 0
    counted = False
    for _attempt in range(200):  # bounded: a service that never serves it ends the bench
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**20)
        resume = f"Last-Event-ID: {last_id}\r\n" if last_id else ""
        writer.write((f"GET /v1/jobs/{job_id}/logs?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      f"{token}\r\nAccept: text/event-stream\r\n{resume}Connection: close\r\n\r\n").encode())
        event = None
        try:
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split()[1])
            if status == 503:
                refused += 1
                after = re.search(rb"(?im)^retry-after: *(\d+)", head)
                await asyncio.sleep(int(after.group(1)) * random.uniform(1.0, 1.25) if after else 1.0)
                continue
            if status != 200:
                break
            if not counted:
                counted = True
                attached.append(1)
            while True:
                raw = await reader.readline()
                if not raw:
                    break
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("id: "):
                    last_id = line[4:]
                elif line.startswith("data: ") and event == "log":
                    msg = json.loads(line[6:])["message"]
                    if msg.startswith("workerpool0-0 line "):
                        lines.append(int(msg.rsplit(" ", 1)[1]))
                elif line.startswith("data: ") and event == "end":
                    ended = True
                    break
                elif line.startswith("data: ") and event in ("resync", "reconnect"):
                    last_id = json.loads(line[6:]).get("cursor") or last_id
                    break
        except (OSError, asyncio.IncompleteReadError) as e:
            event = type(e).__name__
        finally:
            writer.close()
        if ended:
            break
        resumed += 1
    results.append((status, lines == list(range(expect)), ended, len(lines), event, refused, resumed))


def followers_process(port: int, job_id: str, tokens: list[str], n: int, lines: int, out: Path) -> None:
    """The followers, in a process of their own: 1,000 streams keep a Python event loop busy,
    and a GET measured from that loop would time the client, not the service. `out`.attached
    appears once every follower has its stream (the bench opens the gate then)."""
    async def run() -> list:
        results: list = []
        attached: list = []

        async def watch() -> None:
            while len(attached) < n and len(results) < n:
                await asyncio.sleep(0.1)
            out.with_suffix(".attached").write_text(str(len(attached)))
        # Each token has its share, within the default TRAINJOBS_MAX_STREAMS_PER_CALLER.
        await asyncio.gather(watch(), *(follower(port, job_id, tokens[i % len(tokens)], lines, results, attached)
                                        for i in range(n)))
        return results
    out.write_text(json.dumps(asyncio.run(run())))


async def followers_run(url: str, port: int, n: int, lines: int, gate: Path, svc_cpu, work: Path,
                        profile: str | None = None, svc_pid: int = 0) -> dict:
    """svc_cpu: the service's CPU seconds so far (measured from the gate: the lines' fan-out)."""
    async with httpx.AsyncClient(base_url=url, headers=H, timeout=60) as c:
        # The lines come after the gate opens, so every follower is attached by then.
        spec = {"container": {"image_uri": "local", "command": [
            "python", "-c", "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
            "for i in range(int(sys.argv[2])):\n    print(f'workerpool0-0 line {i}', flush=True)\n"
            "    time.sleep(0.01)\n", str(gate), str(lines)]}}
        r = await c.post("/v1/templates", json={"name": "talker", "spec": spec})
        assert r.status_code == 201, r.text
        job = (await c.post("/v1/jobs", json={"template": "talker", "backend": "local"})).json()
        while (await c.get(f"/v1/jobs/{job['id']}")).json()["state"] != "RUNNING":
            await asyncio.sleep(0.1)
        # Viewer tokens enough for every follower within the default per-caller cap (64 a process).
        tokens = []
        for i in range(-(-n // 60)):
            r = await c.post("/v1/tokens", json={"name": f"follower-{i}", "role": "viewer"})
            assert r.status_code == 201, r.text
            tokens.append(r.json()["token"])
        (work / "tokens.json").write_text(json.dumps(tokens))
        out = work / "followers.json"
        proc = subprocess.Popen([sys.executable, __file__, "--follower-process", str(port), job["id"],
                                 str(work / "tokens.json"), str(n), str(lines), str(out)], preexec_fn=raise_fd_limit)
        # Attached: the followers' process says so once each has its stream (a real signal, not a sleep).
        while not out.with_suffix(".attached").exists():
            if proc.poll() is not None:
                raise SystemExit("the followers' process ended before they were all attached")
            await asyncio.sleep(0.1)
        spy = None
        if profile:  # the fan-out only: py-spy from the gate to the last follower's end
            spy = subprocess.Popen(["py-spy", "record", "-p", str(svc_pid), "-o", profile, "-r", "250", "--gil",
                                    "--threads", *(["--format", "raw"] if profile.endswith(".txt") else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        before = job_get_buckets((await c.get("/metrics", headers=METRICS_AUTH)).text)
        gate.touch()
        get_lat: list[float] = []
        get_status: dict[int, int] = {}
        cpu0, t0_all = svc_cpu(), time.monotonic()
        while proc.poll() is None:
            t0 = time.perf_counter()
            r = await c.get(f"/v1/jobs/{job['id']}")
            get_lat.append(time.perf_counter() - t0)
            get_status[r.status_code] = get_status.get(r.status_code, 0) + 1
            await asyncio.sleep(0.02)
        cpu, wall = svc_cpu() - cpu0, time.monotonic() - t0_all
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait()
        after = job_get_buckets((await c.get("/metrics", headers=METRICS_AUTH)).text)
        served = {le: after[le] - before.get(le, 0) for le in after}
        return {"results": json.loads(out.read_text()), "get": get_lat, "get_status": get_status,
                "cpu": cpu, "wall": wall, "served": served}


def job_get_buckets(metrics: str) -> dict[str, float]:
    """The service's own latency histogram of GET /v1/jobs/{job_id}: {le: count}."""
    out = {}
    for line in metrics.splitlines():
        if line.startswith("trainjobs_http_route_request_duration_seconds_bucket{") and 'method="GET"' in line \
                and 'route="/v1/jobs/{job_id}"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[le] = float(line.rsplit(" ", 1)[1])
    return out


def mix_part(args, db_url: str, work: Path) -> None:
    svc = Service(db_url, work, TRAINJOBS_LOCAL_MAX_RUNNING_JOBS="0")
    try:
        idle = svc.rss_mb()
        peak = [idle]

        async def sample():
            while True:
                peak.append(svc.rss_mb())
                await asyncio.sleep(0.2)

        async def run_mix():
            s = asyncio.create_task(sample())
            try:
                return await mix(svc.url, args.clients, args.seconds)
            finally:
                s.cancel()
        out = asyncio.run(run_mix())
        with psycopg.connect(db_url.replace("+psycopg", "")) as conn:
            stored = {str(r[0]) for r in conn.execute("SELECT id FROM jobs")}
        st = out["statuses"]
        bad = {k: v for k, v in st.items() if not (200 <= k < 300 or k == 503)}
        print(f"mix: {args.clients} clients x {args.seconds:g} s, one worker, PostgreSQL")
        print(f"  answers by status: {dict(sorted(st.items()))}; transport errors: {len(out['errors'])}"
              + (f" ({', '.join(sorted(set(out['errors'])))})" if out['errors'] else ""))
        print(f"  answers other than 2xx/503: {sum(bad.values())}")
        print(f"  201s: {len(out['created']) - 5}; rows: {len(stored) - 5}; 201 without row: "
              f"{len(out['created'] - stored)}; row without 201: {len(stored - out['created'])}")
        print(f"  GET p50 {pct(out['get'], 50)*1000:.0f} ms, p99 {pct(out['get'], 99)*1000:.0f} ms; "
              f"/healthz p99 {pct(out['health'], 99)*1000:.0f} ms")
        print(f"  RSS: idle {idle:.0f} MB, peak under the mix {max(peak):.0f} MB")
    finally:
        svc.stop()


def followers_part(args, db_url: str, work: Path) -> None:
    # A database of its own: the mix's hundreds of QUEUED demo jobs would be launched
    # first (oldest first) and the followed job would wait behind them.
    # One token for every follower: past the per-caller cap (64 by default) they would be 429s.
    # The gate is a file in `work`: visible in the replica's sandbox (its own mount namespace and
    # uid since round 3) only as a shared folder, and reachable by the replica's uid.
    os.chmod(work, 0o711)
    # Every TRAINJOBS_ limit at its default (the followers use many tokens: see followers_run).
    svc = Service(db_url, work, args.workers, TRAINJOBS_LOCAL_MAX_RUNNING_JOBS="2",
                  TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS=json.dumps([str(work)]),
                  **{"TRAINJOBS_" + k.upper(): v for k, v in (kv.split("=", 1) for kv in args.set)})
    try:
        idle = svc.rss_mb()
        cpu0, t0 = svc.cpu_seconds(), time.monotonic()
        gate = work / "gate"
        res = asyncio.run(followers_run(svc.url, svc.port, args.followers, args.lines, gate, svc.cpu_seconds,
                                        work, args.profile, svc.proc.pid))
        cpu = svc.cpu_seconds() - cpu0
        wall = time.monotonic() - t0
        ok = sum(1 for status, complete, ended, *_ in res["results"] if status == 200 and complete and ended)
        why: dict[str, int] = {}
        for status, complete, ended, _, last, *_ in res["results"]:
            if not (status == 200 and complete and ended):
                k = f"status {status}, last event {last}"
                why[k] = why.get(k, 0) + 1
        print(f"followers: {args.followers} SSE followers of one local job printing {args.lines} lines, "
              f"{args.workers} worker process(es), {', '.join(args.set) or 'default settings'} "
              "(the followers in one process, the GET "
              "client in another)")
        refused = sum(r[5] for r in res["results"])
        print(f"  connecting: {refused} answers 503 with Retry-After (obeyed: {sum(1 for r in res['results'] if r[5])}"
              f" followers came back later); streams resumed with Last-Event-ID: {sum(r[6] for r in res['results'])}")
        print(f"  complete (every line in order + end): {ok}/{args.followers}"
              + (f"; the others: {why}" if why else ""))
        print(f"  GET /v1/jobs/{{id}} meanwhile: p50 {pct(res['get'], 50)*1000:.0f} ms, "
              f"p99 {pct(res['get'], 99)*1000:.0f} ms, max {max(res['get'])*1000:.0f} ms "
              f"({len(res['get'])} requests, statuses {res['get_status']})")
        served = res["served"]
        print("  the same GETs timed by the service (its histogram): " + ", ".join(
            f"{served[le]:.0f} within {float(le) * 1000:g} ms" for le in ("0.01", "0.025", "0.05", "0.1")
            if le in served) + f" of {served.get('+Inf', 0):.0f}")
        print(f"  service CPU while the lines went out: {res['cpu']:.1f} s over {res['wall']:.1f} s "
              f"({res['cpu'] / res['wall']:.2f} cores)")
        print(f"  service CPU, connecting included: {cpu:.1f} s over {wall:.1f} s ({cpu / wall:.2f} cores); "
              f"RSS {idle:.0f} MB idle, {svc.rss_mb():.0f} MB after")
    finally:
        svc.stop()


def main() -> None:
    if sys.argv[1:2] == ["--follower-process"]:
        port, job_id, tokens, n, lines, out = sys.argv[2:8]
        raise_fd_limit()
        return followers_process(int(port), job_id, json.loads(Path(tokens).read_text()), int(n), int(lines),
                                 Path(out))
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--followers", type=int, default=1000)
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--workers", type=int, default=1, help="API worker processes (one database)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for the followers' service, e.g. --set LOGS_FANOUT_LOOP_SHARE=0.1 "
                         "(default: every setting at its default)")
    ap.add_argument("--only", choices=["mix", "followers"], help="run one part")
    ap.add_argument("--profile", help="py-spy (on PATH) of the service during the followers' fan-out: "
                                      "an svg, or py-spy's raw stacks if the name ends in .txt")
    args = ap.parse_args()
    raise_fd_limit()
    name = f"trainjobs_load_{uuid.uuid4().hex[:8]}"
    base = ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    work = Path(tempfile.mkdtemp(prefix="trainjobs-load-"))
    os.chmod(work, 0o711)
    try:
        for part, suffix, run in (("mix", "", mix_part), ("followers", "_f", followers_part)):
            if args.only in (None, part):
                with psycopg.connect(ADMIN, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}{suffix}"')
                run(args, f"{base}/{name}{suffix}", work)
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP DATABASE IF EXISTS "{name}_f" WITH (FORCE)')


if __name__ == "__main__":
    main()
