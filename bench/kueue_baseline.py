"""Kueue's scheduler baseline (test/performance/scheduler/configs/baseline in kubernetes-sigs/kueue),
run on our side: the real service, its queue and controller, on the sim backend (issue 51, point 2).

Kueue's test: 5 cohorts of 6 ClusterQueues, each queue nominal quota 20 and borrowing limit 100,
reclaim within the cohort, preemption of lower priority within a queue; per queue 350 small
workloads (request 1, 200 ms, priority 50, one every 100 ms), 100 medium (5, 500 ms, priority 100,
one every 500 ms) and 50 large (20, 1 s, priority 200, one every 1.2 s): 15,000 workloads.

Mapped here:
- a cohort is a backend: the sim registered under 5 names (bench/sim_cohorts.py, one
  `registry.register` each), each with capacity {"core": 120} (6 x 20);
- a ClusterQueue is a (team, backend) pair: 6 teams, each with the share nominal {"core": 20},
  borrowing_limit {"core": 100} on every backend (reclaim: a team inside its nominal quota gets
  it back from borrowers, docs/queue.md);
- priorities: classes small (50), medium (100, preempts) and large (200, preempts), made through
  PUT /v1/priority-classes; one template per class and team naming its class and labels
  sim-demand-core (1, 5, 20) and sim-duration-seconds;
- durations: the label is whole seconds, so TRAINJOBS_SIM_SPEED=10 and 2 / 5 / 10 s: 200 ms,
  500 ms, 1 s of the wall clock (--speed changes the speed, the labels follow);
- every job through POST /v1/jobs, by its team's token, at its time in Kueue's schedule, from
  --clients concurrent asyncio clients; one `serve` process (--workers 1: the plugin's
  registrations live in its interpreter) on a fresh PostgreSQL database on 127.0.0.1:5432.

Measured: every job SUCCEEDED exactly once (its attempts: a preempted attempt is FAILED and the
next one runs), the demand of PENDING/RUNNING/CANCELLING jobs per backend sampled from the
database every --sample seconds (never above 120), the wall (first submit to the last end),
admissions a second, average time to admission per class (the first attempt's
launch_attempted_at minus its created_at), average usage (sampled demand / 600 while the run
lasts), and the controller's pass times (/metrics).

Run: .venv/bin/python bench/kueue_baseline.py [--scale 0.1] [--speed 10] [--clients 24] [--keep-db]
The last line is one JSON object with the figures."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local import free_port, wait  # noqa: E402
from bench.seed_tokens import tokens  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432"
COHORTS = 5
TEAMS = [f"cq{i}" for i in range(1, 7)]
NOMINAL, BORROW = 20, 100
# Kueue's workload sets: name -> (count per queue, cores, wall seconds, priority, every seconds)
CLASSES = {"small": (350, 1, 0.2, 50, 0.1), "medium": (100, 5, 0.5, 100, 0.5), "large": (50, 20, 1.0, 200, 1.2)}
ACTIVE = ("PENDING", "RUNNING", "CANCELLING")
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED")


def fresh_database(name: str) -> str:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')
        c.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


def drop_database(name: str) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_serve(url: str, args, port: int, log: Path) -> subprocess.Popen:
    names = [f"sim{i}" for i in range(1, COHORTS + 1)]
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": url, "TRAINJOBS_BACKENDS": json.dumps(names),
           "TRAINJOBS_DEFAULT_BACKEND": names[0], "TRAINJOBS_SIM_SPEED": str(args.speed),
           "TRAINJOBS_CAPACITY": json.dumps({n: {"core": 6 * NOMINAL} for n in names}),
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_LOG_LEVEL": "WARNING",
           "TRAINJOBS_RECONCILE_INTERVAL_SECONDS": str(args.interval)}
    for kv in args.set:
        k, _, v = kv.partition("=")
        env[f"TRAINJOBS_{k.upper()}"] = v
    out = log.open("w")
    return subprocess.Popen([sys.executable, str(ROOT / "bench" / "sim_cohorts.py"), str(COHORTS), "serve",
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def ok(r: httpx.Response) -> dict:
    if r.status_code >= 300:
        raise SystemExit(f"bench: {r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    return r.json() if r.content else {}


def configure(base: str, op: str, admins: dict[str, str], speed: float) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {op}"}, timeout=30) as c:
        for name, (_, _, _, prio, _) in CLASSES.items():
            ok(c.put(f"/v1/priority-classes/{name}", json={"value": prio, "preempts": name != "small"}))
        for b in range(1, COHORTS + 1):
            for t in TEAMS:
                ok(c.put(f"/v1/teams/{t}/shares/sim{b}", json={"nominal": {"core": NOMINAL},
                                                                "borrowing_limit": {"core": BORROW}}))
    for secret in admins.values():
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as c:
            for name, (_, cores, secs, _, _) in CLASSES.items():
                duration = round(secs * speed)
                if abs(duration - secs * speed) > 1e-9:
                    raise SystemExit(f"bench: {secs} s at speed {speed} is not a whole sim-duration-seconds")
                spec = {"container": {"image_uri": "trainer:1", "command": ["python", "-m", "trainer.task"]},
                        "chief": {}, "priority_class": name,
                        "labels": {"sim-duration-seconds": str(duration), "sim-demand-core": str(cores)}}
                ok(c.post("/v1/templates", json={"name": name, "spec": spec}))
            wait(lambda: all(c.get(f"/v1/templates/{n}").status_code == 200 for n in CLASSES), "templates", 30)


def schedule(scale: float) -> list[tuple[float, str, str, str]]:
    """Every submit: (seconds after the start, team, backend, class), in time order."""
    out = []
    for b in range(1, COHORTS + 1):
        for t in TEAMS:
            for name, (count, _, _, _, every) in CLASSES.items():
                out += [(i * every, t, f"sim{b}", name) for i in range(max(1, round(count * scale)))]
    return sorted(out)


async def submit_all(base: str, admins: dict[str, str], plan, clients: int) -> dict:
    heads = {t: {"Authorization": f"Bearer {s}"} for t, s in admins.items()}
    queue: asyncio.Queue = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)
    lags, errors, retries = [], [], 0
    due: dict[str, float] = {}   # job id -> its time in Kueue's schedule (unix seconds)
    start, wall_start = time.monotonic(), time.time()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(c: httpx.AsyncClient) -> None:
        nonlocal retries
        while not queue.empty():
            at, team, backend, name = queue.get_nowait()
            delay = start + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            key = str(uuid.uuid4())   # a retry (503, a dropped connection) never makes a second job
            for _ in range(50):
                try:
                    r = await c.post("/v1/jobs", json={"template": name, "backend": backend},
                                     headers={**heads[team], "Idempotency-Key": key})
                except httpx.TransportError:
                    retries += 1
                    continue
                if r.status_code == 503:
                    retries += 1
                    await asyncio.sleep(float(r.headers.get("Retry-After", "0.2")))
                    continue
                break
            if r.status_code != 201:
                errors.append(f"{r.status_code} {r.text[:200]}")
            else:
                due[r.json()["id"]] = wall_start + at
            lags.append(time.monotonic() - start - at)

    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as c:
        await asyncio.gather(*(client(c) for _ in range(clients)))
    lags.sort()
    return {"submit_s": time.monotonic() - start, "errors": len(errors), "first_errors": errors[:3],
            "retries": retries, "lag_p50_s": lags[len(lags) // 2], "lag_max_s": lags[-1], "due": due}


class Sampler(threading.Thread):
    """Every `every` s: each backend's demand held by active jobs, and whether anything is left."""

    def __init__(self, dsn: str, every: float) -> None:
        super().__init__(daemon=True)
        self.dsn, self.every = dsn, every
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.unfinished = -1
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            while not self.stop.is_set():
                rows = c.execute("SELECT backend, coalesce(sum((demand->>'core')::int), 0) FROM jobs "
                                 "WHERE state = ANY(%s) GROUP BY backend", (list(ACTIVE),)).fetchall()
                self.samples.append((time.time(), {b: int(n) for b, n in rows}))
                self.unfinished = c.execute("SELECT count(*) FROM jobs WHERE NOT state = ANY(%s)",
                                            (list(FINAL),)).fetchone()[0]
                self.stop.wait(self.every)


def outcome(dsn: str, expected: int, due: dict[str, float]) -> dict:
    """`due`: each job's time in Kueue's schedule, for its wait counted from there (submits lag)."""
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT coalesce(retry_of, id), id, retry_of IS NULL, state, priority_class, created_at, "
                         "launch_attempted_at, started_at, ended_at, error->>'cause' FROM jobs").fetchall()
    roots: dict = {}
    for root, *rest in rows:
        roots.setdefault(root, []).append(rest)
    succeeded = {r: sum(a[2] == "SUCCEEDED" for a in atts) for r, atts in roots.items()}
    lost = expected - sum(1 for n in succeeded.values() if n >= 1)
    double = sum(1 for n in succeeded.values() if n > 1)
    for atts in roots.values():   # two attempts of one job running at once
        spans = sorted((a[6], a[7] or a[6]) for a in atts if a[6] is not None)
        double += any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1))
    other_failures = sum(1 for atts in roots.values() for a in atts
                         if a[2] != "SUCCEEDED" and a[8] != "preemption")
    waits: dict[str, list[float]] = {n: [] for n in CLASSES}
    from_schedule: dict[str, list[float]] = {n: [] for n in CLASSES}
    for atts in roots.values():
        first = next(a for a in atts if a[1])
        admitted = first[5] or first[6]
        if admitted is not None:
            waits[first[3]].append((admitted - first[4]).total_seconds())
            if str(first[0]) in due:
                from_schedule[first[3]].append(_unix(admitted) - due[str(first[0])])
    ends = [a[7] for atts in roots.values() for a in atts if a[7] is not None]
    return {"roots": len(roots), "attempts": len(rows), "lost": lost, "double_starts": double,
            "other_failures": other_failures, "waits": waits, "from_schedule": from_schedule,
            "last_end": _unix(max(ends)) if ends else None}


def _unix(at: datetime) -> float:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def pass_times(base: str, op: str) -> dict:
    """The controller's passes so far (every backend's loop, full and admission passes), from /metrics."""
    text = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {op}"}, timeout=30).text
    def metric(name: str) -> float:
        m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
        return float(m.group(1)) if m else float("nan")
    buckets = {float(le) if le != "+Inf" else float("inf"): float(v) for le, v in
               re.findall(r'^trainjobs_reconcile_duration_seconds_bucket\{le="([^"]+)"\} ([0-9.e+-]+)$', text, re.M)}
    return {"count": metric("trainjobs_reconcile_duration_seconds_count"),
            "sum": metric("trainjobs_reconcile_duration_seconds_sum"), "buckets": buckets}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="share of Kueue's 15,000 jobs (0.1: 1,500)")
    ap.add_argument("--speed", type=float, default=10.0, help="TRAINJOBS_SIM_SPEED (durations 2/5/10 s at 10)")
    ap.add_argument("--interval", type=float, default=0.5, help="TRAINJOBS_RECONCILE_INTERVAL_SECONDS")
    ap.add_argument("--clients", type=int, default=24, help="concurrent submitting clients")
    ap.add_argument("--sample", type=float, default=0.25, help="seconds between demand samples")
    ap.add_argument("--timeout", type=float, default=1800, help="give up after this many seconds")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: another TRAINJOBS_NAME for serve")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--profile", help="FILE: py-spy's collapsed stacks of serve during the run (py-spy on PATH "
                                      "or --py-spy); all threads, idle ones left out")
    ap.add_argument("--py-spy", default="py-spy")
    args = ap.parse_args()
    db = f"kueue_bench_{os.getpid()}"
    url = fresh_database(db)
    dsn = f"{PG}/{db}"
    op, admins = tokens(url, TEAMS)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkdtemp(prefix="kueue-bench-")) / "serve.log"
    proc = start_serve(url, args, port, log)
    try:
        wait(lambda: proc.poll() is not None or _up(base), "serve", 120, 0.2)
        if proc.poll() is not None:
            raise SystemExit(f"bench: serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        configure(base, op, admins, args.speed)
        plan = schedule(args.scale)
        print(f"{len(plan)} jobs, {COHORTS} backends x {len(TEAMS)} teams; load average {loadavg()}", flush=True)
        before = pass_times(base, op)
        spy = subprocess.Popen([args.py_spy, "record", "--pid", str(proc.pid), "--rate", "50", "--format", "raw",
                                "--nonblocking", "-o", args.profile], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) if args.profile else None
        sampler = Sampler(dsn, args.sample)
        sampler.start()
        t0 = time.time()
        sub = asyncio.run(submit_all(base, admins, plan, args.clients))
        print(f"submitted in {sub['submit_s']:.1f} s (Kueue's schedule: {plan[-1][0]:.1f} s); lag p50 "
              f"{sub['lag_p50_s']:.2f} s, max {sub['lag_max_s']:.2f} s; errors {sub['errors']} {sub['first_errors']}; "
              f"retries {sub['retries']}; load average {loadavg()}", flush=True)
        deadline = time.monotonic() + args.timeout
        time.sleep(args.sample * 2)
        while sampler.unfinished != 0 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        sampler.stop.set()
        sampler.join()
        after = pass_times(base, op)
        load_end = loadavg()
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    res = outcome(dsn, len(plan), sub["due"])
    if not args.keep_db:
        drop_database(db)
    end = res["last_end"] or time.time()
    wall = end - t0
    cap = 6 * NOMINAL
    during = [s for at, s in sampler.samples if t0 <= at <= end]
    peak = max((max(s.values(), default=0) for s in during), default=0)
    over = sum(1 for s in during if any(v > cap for v in s.values()))
    usage = sum(sum(s.values()) for s in during) / (len(during) * cap * COHORTS) if during else 0.0
    avg = {n: (sum(w) / len(w) if w else None) for n, w in res["waits"].items()}
    sched = {n: (sum(w) / len(w) if w else None) for n, w in res["from_schedule"].items()}
    passes = after["count"] - before["count"]
    pass_avg = (after["sum"] - before["sum"]) / passes if passes else float("nan")
    slow = {le: int(after["buckets"].get(le, 0) - before["buckets"].get(le, 0)) for le in after["buckets"]}
    print(f"jobs {res['roots']} (attempts {res['attempts']}), lost {res['lost']}, double starts "
          f"{res['double_starts']}, failures other than preemption {res['other_failures']}")
    print(f"wall {wall:.1f} s, admissions {len(plan) / wall:.1f}/s, usage {usage:.1%} ({len(during)} samples), "
          f"peak demand on one backend {peak} of {cap} ({over} samples over)")
    print("average time to admission: " + ", ".join(f"{n} {v:.2f} s" for n, v in avg.items() if v is not None)
          + "; from the job's time in Kueue's schedule: "
          + ", ".join(f"{n} {v:.2f} s" for n, v in sched.items() if v is not None))
    print(f"controller passes {passes:.0f} (5 loops), average {pass_avg * 1000:.1f} ms; cumulative buckets {slow}")
    print(f"load average at the end {load_end}; serve log {log}")
    out = {"jobs": len(plan), "scale": args.scale, "wall_s": round(wall, 1),
           "admissions_per_s": round(len(plan) / wall, 1),
           "admission_s_large": _r(avg["large"]), "admission_s_medium": _r(avg["medium"]),
           "admission_s_small": _r(avg["small"]),
           "admission_from_schedule_s": {n: _r(v) for n, v in sched.items()}, "usage": round(usage, 3), "lost": res["lost"],
           "double_starts": res["double_starts"], "attempts": res["attempts"], "peak_demand": peak,
           "over_capacity_samples": over, "submit_s": round(sub["submit_s"], 1),
           "submit_lag_max_s": round(sub["lag_max_s"], 2), "submit_errors": sub["errors"],
           "pass_ms_avg": round(pass_avg * 1000, 1), "passes": int(passes)}
    print(json.dumps(out))


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


if __name__ == "__main__":
    main()
