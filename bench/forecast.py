"""The queue's forecast against what happened (issue 49, points 1 and 2): GET /v1/queue shows each
waiting job's position as its place in a predicted start order, with `likely_start` (the play over
expected run times) and `estimated_start` (at the latest, time limits). Here the real service runs
them on the sim backend and the bench compares.

Set-up: one `serve` (--workers 1), a fresh SQLite file, the sim backend at --speed, capacity
{"sim": {"core": 4}}, TRAINJOBS_SIM_MAX_RUNNING_JOBS 4 (the launch slots); teams t1 (nominal
{"core": 2}, set through the operator API), t2 and t3 (no share); per team three templates
`short`, `mid`, `long` (sim-duration-seconds 2, 4, 6 x --speed, so 2, 4, 6 s of the wall clock;
`long` holds 2 cores, the others 1; each a time limit of twice its run).

Steps: (1) one job of each template per team, run to SUCCEEDED, so every (team, template) has a
history (the forecast's expected run time is its median); (2) --jobs jobs at once (concurrent
POST /v1/jobs), spread round robin over teams and templates; (3) GET /v1/queue?backend=sim as each
team until one snapshot (the same `computed_at` in the three views) holds every submitted job
either waiting or already launched: each waiting job's position, likely_start and
estimated_start (ids come from its own team's view); (4) nothing more arrives; every job runs to
its end; each job's started_at from its view (a job preempted later: its first attempt's start,
which is the start the forecast predicts; the new attempt is not counted again).

Figures, over the jobs waiting in the snapshot: Kendall's tau-b between the predicted positions
and the real start order (started_at; goal >= 0.9); the share with started_at <= likely_start +
20% of the predicted wait (likely_start - computed_at; goal >= 80%); the share with started_at <=
estimated_start, of the jobs that show one (goal 100%; null where nothing known frees enough),
and how many show one; the mean and largest lateness against likely_start.

Run: .venv/bin/python bench/forecast.py [--jobs 40] [--speed 1] [--interval 0.5] [--long-cores 2]
The last line is one JSON object (tau, within_likely_20pct, by_latest, jobs)."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local import free_port, wait  # noqa: E402
from bench.seed_tokens import tokens  # noqa: E402

TEAMS = ("t1", "t2", "t3")
NOMINAL = {"t1": {"core": 2}}
TEMPLATES = {"short": (2, 1), "mid": (4, 1), "long": (6, 2)}   # name -> (wall seconds, cores)
CAPACITY, SLOTS = 4, 4
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED")


def start_serve(url: str, args, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": url, "TRAINJOBS_BACKENDS": '["sim"]',
           "TRAINJOBS_DEFAULT_BACKEND": "sim", "TRAINJOBS_SIM_SPEED": str(args.speed),
           "TRAINJOBS_SIM_MAX_RUNNING_JOBS": str(SLOTS),
           "TRAINJOBS_CAPACITY": json.dumps({"sim": {"core": CAPACITY}}),
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_LOG_LEVEL": "WARNING",
           "TRAINJOBS_RECONCILE_INTERVAL_SECONDS": str(args.interval)}
    out = log.open("w")
    code = "import sys; from service.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def ok(r: httpx.Response) -> dict:
    if r.status_code >= 300:
        raise SystemExit(f"bench: {r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    return r.json() if r.content else {}


def client(base: str, secret: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=30)


def configure(base: str, op: str, admins: dict[str, str], speed: float) -> None:
    with client(base, op) as c:
        for team, nominal in NOMINAL.items():
            ok(c.put(f"/v1/teams/{team}/shares/sim", json={"nominal": nominal}))
    for secret in admins.values():
        with client(base, secret) as c:
            for name, (secs, cores) in TEMPLATES.items():
                duration = round(secs * speed)
                if abs(duration - secs * speed) > 1e-9:
                    raise SystemExit(f"bench: {secs} s at speed {speed} is not a whole sim-duration-seconds")
                spec = {"container": {"image_uri": "trainer:1", "command": ["python", "-m", "trainer.task"]},
                        "chief": {}, "scheduling": {"timeout_seconds": 2 * secs}, "labels": {"sim-duration-seconds": str(duration),
                                                "sim-demand-core": str(cores)}}
                ok(c.post("/v1/templates", json={"name": name, "spec": spec}))


async def submit(base: str, admins: dict[str, str], plan: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every (team, template) at once; answers (team, job id) in the plan's order."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as c:
        async def one(team: str, name: str) -> tuple[str, str]:
            r = await c.post("/v1/jobs", json={"template": name, "backend": "sim"},
                             headers={"Authorization": f"Bearer {admins[team]}"})
            return team, ok(r)["id"]
        return list(await asyncio.gather(*(one(t, n) for t, n in plan)))


def job_view(base: str, secret: str, job_id: str) -> dict:
    with client(base, secret) as c:
        return ok(c.get(f"/v1/jobs/{job_id}"))


def all_final(base: str, admins: dict[str, str], jobs: list[tuple[str, str]]) -> bool:
    return all(job_view(base, admins[t], j)["state"] in FINAL for t, j in jobs)


def snapshot(base: str, admins: dict[str, str], owner: dict[str, str]) -> dict | None:
    """One consistent read of the queue (the same computed_at in every team's view) in which every
    submitted job is waiting or has left the queue; None to try again."""
    views = {}
    for team, secret in admins.items():
        with client(base, secret) as c:
            views[team] = ok(c.get("/v1/queue", params={"backend": "sim", "limit": 1000}))["items"][0]
    if len({v["computed_at"] for v in views.values()}) != 1:
        return None
    waiting = {}
    for team, v in views.items():
        for w in v["waiting"]:
            if w["team"] == team and w.get("id"):
                waiting[w["id"]] = w
    first = next(iter(views.values()))
    if len(waiting) != len(first["waiting"]) or not set(waiting) <= set(owner):
        return None   # a job not ours, or a view without its ids
    if any(job_view(base, admins[t], j)["state"] == "QUEUED" for j, t in owner.items() if j not in waiting):
        return None   # a submitted job not yet in the queue's cache
    return {"computed_at": first["computed_at"], "waiting": waiting}


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def kendall_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b (ties in either ranking counted as scipy.stats.kendalltau does)."""
    conc = disc = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            a, b = (x[i] > x[j]) - (x[i] < x[j]), (y[i] > y[j]) - (y[i] < y[j])
            if a and b:
                conc += a == b
                disc += a != b
            elif a:
                ty += 1
            elif b:
                tx += 1
    denom = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / denom if denom else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=40, help="jobs submitted at once")
    ap.add_argument("--speed", type=float, default=1.0, help="TRAINJOBS_SIM_SPEED (durations 2/4/6 s of wall clock)")
    ap.add_argument("--interval", type=float, default=0.5, help="TRAINJOBS_RECONCILE_INTERVAL_SECONDS")
    ap.add_argument("--long-cores", type=int, default=2, help="cores the `long` template holds (1: every job 1)")
    ap.add_argument("--timeout", type=float, default=600, help="give up after this many seconds")
    ap.add_argument("--dump", type=Path, help="write each waiting job's row (predicted and real) here, as JSON")
    args = ap.parse_args()
    TEMPLATES["long"] = (TEMPLATES["long"][0], args.long_cores)
    tmp = Path(tempfile.mkdtemp(prefix="forecast-bench-"))
    url = f"sqlite:///{tmp / 'db.sqlite'}"
    op, admins = tokens(url, TEAMS)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp / "serve.log"
    proc = start_serve(url, args, port, log)
    try:
        wait(lambda: proc.poll() is not None or _up(base), "serve", 120, 0.2)
        if proc.poll() is not None:
            raise SystemExit(f"bench: serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        configure(base, op, admins, args.speed)
        history = []
        for team in TEAMS:   # one team at a time: its three fit the capacity, so nothing is preempted
            ran = asyncio.run(submit(base, admins, [(team, n) for n in TEMPLATES]))
            wait(lambda ran=ran: all_final(base, admins, ran), "the history jobs", args.timeout, 0.5)
            history += ran
        bad = [j for t, j in history if job_view(base, admins[t], j)["state"] != "SUCCEEDED"]
        if bad:
            raise SystemExit(f"bench: history jobs not SUCCEEDED: {bad}")
        names = list(TEMPLATES)
        plan = [(TEAMS[i % len(TEAMS)], names[(i // len(TEAMS)) % len(names)]) for i in range(args.jobs)]
        jobs = asyncio.run(submit(base, admins, plan))
        owner = {j: t for t, j in jobs}
        snap = wait(lambda: snapshot(base, admins, owner), "a consistent queue snapshot", 60, 0.05)
        before = passes(base)
        wait(lambda: all_final(base, admins, jobs), "every job's end", args.timeout, 0.5)
        after = passes(base)
        views = {j: job_view(base, admins[t], j) for t, j in jobs}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    took = (after[0] - before[0]) / (after[1] - before[1]) if after[1] > before[1] else None
    report(snap, views, owner, {j: n for (_, j), (_, n) in zip(jobs, plan, strict=True)}, log, took, args.dump)


def passes(base: str) -> tuple[float, int]:
    """The controller's passes so far: (seconds in them, how many), from /metrics (the
    trainjobs_reconcile_duration_seconds histogram): what the play's pass lengths stand for."""
    total = count = 0.0
    for line in httpx.get(f"{base}/metrics", timeout=30).text.splitlines():
        if line.startswith("trainjobs_reconcile_duration_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("trainjobs_reconcile_duration_seconds_count"):
            count = float(line.split()[-1])
    return total, int(count)


def report(snap: dict, views: dict[str, dict], owner: dict[str, str], plan_of: dict[str, str], log: Path,
           took: float | None = None, dump: Path | None = None) -> None:
    read_at = ts(snap["computed_at"])
    rows = []
    for j, w in snap["waiting"].items():
        v = views[j]
        preempted = (v.get("error") or {}).get("cause") == "preemption"
        if (v["state"] != "SUCCEEDED" and not preempted) or not v.get("started_at"):
            raise SystemExit(f"bench: job {j} ended {v['state']} (started_at {v.get('started_at')})")
        rows.append((w["position"], ts(v["started_at"]), ts(w["likely_start"]) if w.get("likely_start") else None,
                     ts(w["estimated_start"]) if w.get("estimated_start") else None, owner[j], plan_of[j]))
    rows.sort()
    preempted = sum(1 for j in snap["waiting"] if (views[j].get("error") or {}).get("cause") == "preemption")
    tau = kendall_tau_b([r[0] for r in rows], [r[1] for r in rows])
    within = [r for r in rows if r[2] is not None and r[1] <= r[2] + 0.2 * max(0.0, r[2] - read_at)]
    with_latest = [r for r in rows if r[3] is not None]
    latest = [r for r in with_latest if r[3] is not None and r[1] <= r[3]]
    late = [r[1] - r[2] for r in rows if r[2] is not None]
    # The pass gap: from the end that made room for a job to its launch (the controller notices an
    # end on its next pass, then launches on a pass): what the play counts as nothing.
    ends = sorted(ts(v["ended_at"]) for v in views.values() if v.get("ended_at"))
    # Use of the capacity: the waiting jobs' mean wait (snapshot to start) and the makespan (snapshot
    # to the last end): a policy that keeps capacity for a big job must not leave it idle for long.
    waits = [r[1] - read_at for r in rows]
    makespan = max(ends) - read_at if ends else None
    gaps = [r[1] - max(e for e in ends if e <= r[1]) for r in rows if any(e <= r[1] for e in ends)]
    print(f"{len(views)} jobs submitted, {len(rows)} waiting in the snapshot of {snap['computed_at']} "
          f"(the rest launched before it); serve log {log}")
    print("pos team template  likely   started  latest   (seconds after the snapshot)")
    for pos, started, likely, latest_at, team, name in rows:
        f = lambda t: "    -   " if t is None else f"{t - read_at:8.2f}"  # noqa: E731
        print(f"{pos:3d} {team:4s} {name:8s} {f(likely)} {f(started)} {f(latest_at)}")
    if late:
        print(f"started - likely_start: mean {sum(late) / len(late):.2f} s, largest {max(late):.2f} s, "
              f"smallest {min(late):.2f} s")
    if gaps:
        print(f"from the last end before a job's start to its start: mean {sum(gaps) / len(gaps):.2f} s, "
              f"largest {max(gaps):.2f} s")
    print(f"mean wait {sum(waits) / len(waits):.2f} s; makespan {makespan:.2f} s" if waits and makespan else "")
    out = {"tau": round(tau, 3), "within_likely_20pct": round(len(within) / len(rows), 3) if rows else None,
           "by_latest": round(len(latest) / len(with_latest), 3) if with_latest else None,
           "with_latest": len(with_latest), "jobs": len(rows),
           "submitted": len(views), "late_mean_s": round(sum(late) / len(late), 2) if late else None,
           "late_max_s": round(max(late), 2) if late else None,
           "preempted": preempted, "gap_mean_s": round(sum(gaps) / len(gaps), 2) if gaps else None,
           "wait_mean_s": round(sum(waits) / len(waits), 2) if waits else None,
           "makespan_s": round(makespan, 2) if makespan is not None else None,
           "pass_took_s": round(took, 3) if took is not None else None}
    if dump is not None:
        dump.write_text(json.dumps({"computed_at": snap["computed_at"], "figures": out, "jobs": [
            {"id": j, "position": w["position"], "team": owner[j], "template": plan_of[j], "likely": w.get("likely_start"),
             "latest": w.get("estimated_start"), "started": views[j].get("started_at"), "ended": views[j].get("ended_at"),
             "why": w.get("why")} for j, w in snap["waiting"].items()],
            "ends": sorted(v["ended_at"] for v in views.values() if v.get("ended_at"))}, indent=1))
    print(json.dumps(out))


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


if __name__ == "__main__":
    main()
