"""Placement across backends end to end (issue 52, point 6): three teams with equal shares on the
local backend, a real Slurm cluster and Vertex AI (the fake), jobs that accept two or three of them.

Mapped here:
- one `serve` process (uvicorn, one worker) on a fresh PostgreSQL database on 127.0.0.1:5432, with
  backends local (real sandboxed processes), slurm (tests/backends/slurm/cluster.py: munged,
  slurmctld and two slurmd in a temp folder; needs root) and vertex (tests/fakes: the fake Vertex AI
  and Cloud Logging servers, run in this process; a thread here plays Vertex: a CustomJob it has
  not seen goes RUNNING, and SUCCEEDED once its job's seconds have passed);
- capacities (TRAINJOBS_CAPACITY): local {"core": 4} (and TRAINJOBS_LOCAL_MAX_RUNNING_JOBS=4),
  slurm {"vcpu": 4} (one CPU a task), vertex {"vcpu": 12} (a chief of the default machine,
  4 vCPUs: 3 at once); teams t1, t2, t3 with the same share on each (a third nominal, the rest
  borrowable: PUT /v1/teams/{t}/shares/{backend});
- --jobs jobs (300) of a random team, each `python -c "time.sleep(s)"` of 3 to 10 s, accepting 2 or
  3 backends in a random order (a template per team and order: `"backends": [...]`), submitted
  through POST /v1/jobs at seeded times over --minutes (a 2-hour day compressed: busier mid-day);
- the baseline: the same arrivals again on a fresh database and fresh backends, each job bound to
  the first backend it lists (the request's `backend` narrows the list to it): each backend then
  serves only the jobs that prefer it, as three single-backend queues would. (Not "every job on one
  backend": that backend would get three times its share of the load, a baseline no one would run.)

Measured from the database at the end of each run: wait = the first attempt's launch_attempted_at
(else started_at) minus created_at, p50 and p90; double starts: a job with more than one attempt
launched, or more than one CustomJob on the fake for one job; Jain's index J = (sum x)^2 / (n sum x^2)
over each team's decayed usage from GET /v1/usage divided by its share weight (all 1); cost: each
job's price per hour on the backend it ran on times its seconds (TRAINJOBS_PLACEMENT_PRICES for
local and slurm; Vertex's list price of the job, service/cost) against every job on its first-listed
backend. Goals (issue 52.6): p50 at most 0.6 of the baseline's, 0 double starts, J at least 0.95.

Run: .venv/bin/python bench/placement.py [--jobs 300] [--minutes 4] [--seed 1] [--baseline first|each|none]
The last line is one JSON object with the figures."""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.kueue_baseline import drop_database, fresh_database, loadavg, ok  # noqa: E402
from bench.local import free_port, wait  # noqa: E402
from bench.seed_tokens import tokens  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432"
TEAMS = ["t1", "t2", "t3"]
BACKENDS = ["local", "slurm", "vertex"]
CAPACITY = {"local": {"core": 4}, "slurm": {"vcpu": 4}, "vertex": {"vcpu": 12}}
PRICES = {"local": {"core": 0.02}, "slurm": {"vcpu": 0.035}}   # per resource-hour; vertex: its list price
ORDERS = [list(p) for n in (2, 3) for p in itertools.permutations(BACKENDS, n)]
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED")
SLEEP = "import sys, time; time.sleep(float(sys.argv[1]))"


def order_name(order: list[str]) -> str:
    return "p-" + "-".join(order)


def spec(order: list[str]) -> dict:
    return {"container": {"image_uri": "bench:1", "command": ["python", "-c", SLEEP]},
            "chief": {"container": {"args": ["${secs}"]}}, "backends": order}


def plan(jobs: int, minutes: float, seed: int) -> list[dict]:
    """Each job: its submit time (s after the start; arrivals twice as dense mid-day as at its ends),
    team, backends in its order and seconds."""
    rnd, span, out = random.Random(seed), minutes * 60, []
    while len(out) < jobs:
        t = rnd.uniform(0, span)
        if rnd.random() < (1 + math.sin(math.pi * t / span)) / 2:
            out.append({"at": t, "team": rnd.choice(TEAMS), "order": rnd.choice(ORDERS),
                        "secs": rnd.randint(3, 10)})
    return sorted(out, key=lambda j: j["at"])


class VertexPlayer(threading.Thread):
    """Plays Vertex AI on the fake: a new CustomJob runs at once and succeeds after its seconds
    (the chief's first arg); counts CustomJobs per trainjobs job (a second one is a double start)."""

    def __init__(self, fake) -> None:
        super().__init__(daemon=True)
        self.fake, self.seen, self.per_job = fake, {}, {}
        self.stop = threading.Event()

    def run(self) -> None:
        from tests.fakes.vertex_jobs import _job_id
        while not self.stop.wait(0.2):
            with self.fake._lock:
                for name, j in list(self.fake.jobs.items()):
                    state = j.data.get("state")
                    if name not in self.seen:
                        self.seen[name] = time.monotonic()
                        jid = _job_id(j.data)
                        self.per_job[jid] = self.per_job.get(jid, 0) + 1
                        self.fake.set_state(name, "JOB_STATE_RUNNING")
                    elif state == "JOB_STATE_RUNNING":
                        secs = float(j.data["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"][0])
                        if time.monotonic() - self.seen[name] >= secs:
                            self.fake.set_state(name, "JOB_STATE_SUCCEEDED")
                    elif state == "JOB_STATE_CANCELLING":
                        self.fake.set_state(name, "JOB_STATE_CANCELLED", error=(1, "CANCELED"))


def serve_env(url: str, cluster, fake, logs, work: Path) -> dict[str, str]:
    return {**os.environ, "TRAINJOBS_DATABASE_URL": url, "TRAINJOBS_BACKENDS": json.dumps(BACKENDS),
            "TRAINJOBS_DEFAULT_BACKEND": "local", "TRAINJOBS_CAPACITY": json.dumps(CAPACITY),
            "TRAINJOBS_PLACEMENT_PRICES": json.dumps(PRICES), "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "4",
            "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_LOG_LEVEL": "WARNING",
            "TRAINJOBS_RECONCILE_INTERVAL_SECONDS": "0.5", "TRAINJOBS_USAGE_RECOMPUTE_SECONDS": "1",
            "TRAINJOBS_SLURM_CONF": str(cluster.conf), "TRAINJOBS_SLURM_WORK_DIR": str(work / "slurm-runs"),
            "TRAINJOBS_SLURM_PYTHON": sys.executable, "TRAINJOBS_SLURM_JOB_USER": "nobody",
            "TRAINJOBS_SLURM_CPUS_PER_TASK": "1", "TRAINJOBS_SLURM_POLL_INTERVAL_SECONDS": "0.5",
            "TRAINJOBS_VERTEX_PROJECT": fake.project, "TRAINJOBS_VERTEX_LOCATION": fake.location,
            "TRAINJOBS_VERTEX_API_ENDPOINT": fake.url, "TRAINJOBS_LOGGING_API_ENDPOINT": logs.url,
            "TRAINJOBS_VERTEX_POLL_INTERVAL_SECONDS": "0.5", "TRAINJOBS_VERTEX_PROGRESS_INTERVAL_SECONDS": "3600",
            "TRAINJOBS_VERTEX_CREATE_PER_MINUTE": "6000", "TRAINJOBS_VERTEX_CREATE_BURST": "1000",
            "TRAINJOBS_VERTEX_CALLS_PER_MINUTE": "60000", "TRAINJOBS_VERTEX_CALLS_BURST": "10000"}


def configure(base: str, op: str, admins: dict[str, str]) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {op}"}, timeout=30) as c:
        for b, cap in CAPACITY.items():
            for t in TEAMS:
                nominal = {r: n // len(TEAMS) for r, n in cap.items()}
                borrow = {r: n - nominal[r] for r, n in cap.items()}
                ok(c.put(f"/v1/teams/{t}/shares/{b}", json={"nominal": nominal, "borrowing_limit": borrow}))
    for secret in admins.values():
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as c:
            for order in ORDERS:
                ok(c.post("/v1/templates", json={"name": order_name(order), "spec": spec(order),
                                                 "parameters": [{"name": "secs", "type": "string"}]}))


async def submit_all(base: str, admins: dict[str, str], jobs: list[dict], bind: str | None) -> dict:
    """bind: None (each job accepts its list), "first" (each on its first), or one backend for all."""
    heads = {t: {"Authorization": f"Bearer {s}"} for t, s in admins.items()}
    ids: dict[str, dict] = {}
    errors: list[str] = []
    start = time.monotonic()

    async def one(c: httpx.AsyncClient, job: dict) -> None:
        delay = start + job["at"] - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        body = {"template": order_name(job["order"]), "parameters": {"secs": str(job["secs"])}}
        if bind is not None:
            # Bound to one backend for all: a template that lists it (the job's own may not).
            body = {"template": order_name(job["order"] if bind == "first" else next(o for o in ORDERS if o[0] == bind)),
                    "parameters": body["parameters"], "backend": job["order"][0] if bind == "first" else bind}
        key = str(uuid.uuid4())
        for _ in range(20):
            try:
                r = await c.post("/v1/jobs", json=body, headers={**heads[job["team"]], "Idempotency-Key": key})
            except httpx.TransportError:
                continue
            if r.status_code != 503:
                break
            await asyncio.sleep(0.2)
        if r.status_code != 201:
            errors.append(f"{r.status_code} {r.text[:300]}")
        else:
            ids[r.json()["id"]] = job

    async with httpx.AsyncClient(base_url=base, timeout=60) as c:
        await asyncio.gather(*(one(c, j) for j in jobs))
    return {"ids": ids, "errors": errors, "submit_s": time.monotonic() - start}


def vertex_price(order: list[str]) -> float:
    from service import jobspec
    from service.cost import prices
    from service.cost.estimate import Pricer
    priced = {k: v for k, v in spec(order).items() if k != "backends"}
    priced["chief"] = {"container": {"args": ["5"]}}   # the price per hour does not depend on the seconds
    compiled = jobspec.build(priced, [], {}, None,
                             display_name="bench", labels={})[1]
    est = Pricer(prices.load(None), "us-central1").estimate(compiled.custom_job_dict, "vertex")
    if not est.complete:
        raise SystemExit("bench: no complete Vertex price for the bench's job")
    return float(est.per_hour)


def price(backend: str, vertex_per_hour: float) -> float:
    if backend == "vertex":
        return vertex_per_hour
    return sum(PRICES[backend].values())   # one core / one vCPU a job


def run_once(args, jobs: list[dict], bind: str | None, label: str) -> dict:
    from tests.backends.slurm.cluster import SlurmCluster
    from tests.fakes.cloud_logging import FakeCloudLogging
    from tests.fakes.vertex_jobs import FakeJobService

    db = f"placement_bench_{os.getpid()}_{label}"
    url = fresh_database(db)
    dsn = f"{PG}/{db}"
    op, admins = tokens(url, TEAMS)
    work = Path(tempfile.mkdtemp(prefix="placement-bench-"))
    os.chmod(work, 0o755)
    cluster = SlurmCluster().start()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    try:
        with FakeJobService() as fake, FakeCloudLogging() as logs:
            player = VertexPlayer(fake)
            player.start()
            proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory",
                                     "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                                     "--no-access-log"], env=serve_env(url, cluster, fake, logs, work), cwd=ROOT,
                                    stdout=log.open("w"), stderr=subprocess.STDOUT)
            try:
                wait(lambda: proc.poll() is not None or _up(base), "serve", 120, 0.2)
                if proc.poll() is not None:
                    raise SystemExit(f"bench: serve exited {proc.returncode}: {log.read_text()[-3000:]}")
                configure(base, op, admins)
                print(f"[{label}] {len(jobs)} jobs over {args.minutes} min; load average {loadavg()}", flush=True)
                sub = asyncio.run(submit_all(base, admins, jobs, bind))
                print(f"[{label}] submitted in {sub['submit_s']:.1f} s, errors {len(sub['errors'])} "
                      f"{sub['errors'][:2]}; load average {loadavg()}", flush=True)
                deadline = time.monotonic() + args.timeout
                while time.monotonic() < deadline and proc.poll() is None and _unfinished(dsn) > 0:
                    time.sleep(1)
                left = _unfinished(dsn)
                usage = settled_usage(base, op)
                load_end = loadavg()
            finally:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                player.stop.set()
                player.join()
    finally:
        cluster.stop()
        cluster.remove()
    res = measure(dsn, usage)
    res.update(ids=sub["ids"], label=label, unfinished=left, submit_errors=len(sub["errors"]), load_end=load_end, log=str(log),
               vertex_double=sum(1 for n in player.per_job.values() if n > 1))
    if not args.keep_db:
        drop_database(db)
    return res


def measure(dsn: str, usage: dict) -> dict:
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT coalesce(retry_of, id), id, retry_of IS NULL, state, backend, created_at, "
                         "launch_attempted_at, started_at, ended_at, error->>'cause' FROM jobs").fetchall()
    roots: dict[str, list] = {}
    for root, *rest in rows:
        roots.setdefault(str(root), []).append(rest)
    waits, placed, states, causes = [], {}, {}, {}
    double = 0
    for root, atts in roots.items():
        # Started twice: two attempts that succeeded, two on different backends, or one launched
        # before the one before it ended (a retry after a preemption is a new attempt, not this).
        spans = sorted((a[5], a[7] or a[5]) for a in atts if a[5] is not None)
        double += (sum(a[2] == "SUCCEEDED" for a in atts) > 1 or len({a[3] for a in atts if a[5]}) > 1
                   or any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)))
        first = next(a for a in atts if a[1])
        last = max(atts, key=lambda a: a[4])
        states[last[2]] = states.get(last[2], 0) + 1
        for a in atts:
            if a[2] != "SUCCEEDED":
                causes[a[8] or a[2]] = causes.get(a[8] or a[2], 0) + 1
        admitted = first[5] or first[6]
        if admitted is not None:
            waits.append((admitted - first[4]).total_seconds())
            placed[root] = first[3]
    weights = {t["team"]: 1.0 for t in usage["teams"]}   # every share's weight is 1 here
    x = [next((u["units"] for u in usage["teams"] if u["team"] == t), 0.0) / weights.get(t, 1.0) for t in TEAMS]
    jain = sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if any(x) else None
    return {"waits": sorted(waits), "placed": placed, "states": states, "double": double, "usage": x,
            "jain": jain, "attempts": len(rows), "not_succeeded": causes}


def settled_usage(base: str, op: str) -> dict:
    """GET /v1/usage once the ledger has been recomputed after the last job ended (every second here)."""
    done = time.time() + 1
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {op}"}, timeout=30) as c:
        for _ in range(60):
            usage = ok(c.get("/v1/usage"))
            at = usage.get("computed_at")
            if at and datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() > done:
                return usage
            time.sleep(0.5)
    raise SystemExit("bench: the usage ledger was not recomputed within 30 s of the last job's end")


def _unfinished(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM jobs WHERE NOT state = ANY(%s)", (list(FINAL),)).fetchone()[0]


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * len(values)))], 2)


def cost(res: dict, ids: dict[str, dict], vertex_per_hour: float) -> tuple[float, float]:
    ran = sum(price(b, vertex_per_hour) * ids[j]["secs"] / 3600 for j, b in res["placed"].items() if j in ids)
    first = sum(price(job["order"][0], vertex_per_hour) * job["secs"] / 3600 for job in ids.values())
    return round(ran, 6), round(first, 6)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--minutes", type=float, default=4.0, help="the 2-hour day compressed to this many minutes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for the last jobs after the submits")
    ap.add_argument("--baseline", choices=["first", "each", "none"], default="first",
                    help="first: the same arrivals, each job bound to its first backend (one more run); each: all of "
                         "them on one backend, a run per backend, the best p50 kept (three more runs); none")
    ap.add_argument("--keep-db", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench: the Slurm cluster needs root")
    jobs = plan(args.jobs, args.minutes, args.seed)
    per_hour = vertex_price(ORDERS[0])
    print(f"load average {loadavg()}; vertex list price of a job {per_hour:.4f}/h; prices {PRICES}", flush=True)
    across = run_once(args, jobs, None, "across")
    binds = [] if args.baseline == "none" else ["first"] if args.baseline == "first" else BACKENDS
    singles = [run_once(args, jobs, b, f"on-{b}") for b in binds]
    base = min(singles, key=lambda r: pct(r["waits"], 0.5) or 0.0) if singles else None
    ids = {j: job for j, job in _ids(across).items()}
    c, c_first = cost(across, ids, per_hour)
    on = {b: sum(1 for v in across["placed"].values() if v == b) for b in BACKENDS}
    on_first = sum(1 for j, b in across["placed"].items() if j in ids and ids[j]["order"][0] == b)
    for r in (across, *singles):
        if r is None:
            continue
        print(f"[{r['label']}] wait p50 {pct(r['waits'], 0.5)} s, p90 {pct(r['waits'], 0.9)} s, max "
              f"{pct(r['waits'], 1.0)} s; states {r['states']}; attempts {r['attempts']}; double starts "
              f"{r['double']} (+{r['vertex_double']} on the fake); not succeeded {r['not_succeeded']}; usage {[round(u, 3) for u in r['usage']]} "
              f"J {r['jain']}; unfinished {r['unfinished']}; load at the end {r['load_end']}; log {r['log']}")
    p50, p50b = pct(across["waits"], 0.5), pct(base["waits"], 0.5) if base else None
    out = {"jobs": len(jobs), "minutes": args.minutes, "seed": args.seed,
           "p50_wait_s": p50, "p90_wait_s": pct(across["waits"], 0.9),
           "p50_wait_best_single_s": p50b, "p90_wait_best_single_s": pct(base["waits"], 0.9) if base else None,
           "p50_ratio": round(p50 / p50b, 3) if p50 is not None and p50b else None,
           "double_starts": across["double"] + across["vertex_double"],
           "jain": round(across["jain"], 4) if across["jain"] is not None else None,
           "cost": c, "cost_all_first": c_first, "placed_on": on, "on_first_choice": on_first,
           "succeeded": across["states"].get("SUCCEEDED", 0), "unfinished": across["unfinished"],
           "submit_errors": across["submit_errors"],
           "baseline": args.baseline, "baseline_run": base["label"] if base else None,
           "baseline_p50_by_run": {r["label"]: pct(r["waits"], 0.5) for r in singles},
           "baseline_succeeded": base["states"].get("SUCCEEDED", 0) if base else None,
           "baseline_double_starts": base["double"] + base["vertex_double"] if base else None}
    print(json.dumps(out))


def _ids(res: dict) -> dict[str, dict]:
    return res["ids"]


if __name__ == "__main__":
    main()
