"""The queue at scale (issue 51, points 3 and 4), on a real `serve` (sim backend, PostgreSQL):

3. Passes that stay short: a controller pass (BackendLoop.run_once, timed in the serve process)
   with 2,000 jobs held by their teams' limits (20 teams, PUT /v1/teams/{team}/limits
   {"max_concurrent_jobs": 5, "on_exceed": "queue"}, 5 running and 100 waiting each: the plan
   would admit them, capacity is idle, their limit holds them) and 10,000 waiting (50 teams of
   nominal quota 2 cores and borrowing limit 0, 2 running and 200 waiting each). Goal <= 0.5 s.
   The pass log says which passes asked the planner (the others found nothing changed since a
   plan that decided nothing: lifecycle/quiet.py). Then --cancels of another team's running jobs,
   1 s apart: seconds from each cancel's answer to the job's CANCELLED (a cancel must never wait
   for a long pass).
4. Answers that stay fast: with those 10,000 waiting, 8 concurrent readers (members of 8 of the
   waiting teams) each reading in a loop GET /v1/queue?backend=sim&limit=1000&offset=<random>
   or a waiting job of its team (GET /v1/jobs/{id}); p99 of each (goal <= 200 ms), and another
   team's plain GET /v1/jobs meanwhile, p99 against the same read with no readers (goal <= 2x).
   That team reads as a person or a script does, one GET every --other-every seconds (0.2: 5 a
   second, about 2.5% of the process). A process seats the teams fairly (service/web/seats.py):
   each of the nine teams here is owed a ninth of it, and a team asking for less is seated next.
   At 0.05 (20 a second, 10-16% of the process) the other team asks for about its ninth and waits
   its turns like the readers; at 0 it reads back to back, a ninth load generator of its own
   (bench/README.md, "Fair seats").

The jobs the controller launches (the running ones, and the first waiting job of each team) are
submitted through POST /v1/jobs; the rest of the waiting jobs are copies of each team's waiting
job inserted into the database (12,000 submits take minutes on this shared host), with their own
ids and later created_at. Running jobs are sim timers of a day (TRAINJOBS_SIM_SPEED=1).

Run: .venv/bin/python bench/queue_scale.py [--held 2000] [--waiting 10000] [--seconds 60] [--other-every 0.2]
[--cancels 5] [--keep-db] [--set NAME=VALUE]
The last line is one JSON object with the figures."""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.kueue_baseline import drop_database, fresh_database, loadavg  # noqa: E402
from bench.local import free_port, wait  # noqa: E402
from bench.seed_tokens import tokens  # noqa: E402

HELD_TEAMS, HELD_LIMIT = 20, 5
WAIT_TEAMS, WAIT_NOMINAL = 50, 2
READERS = 8
CAPACITY = 1000
SPEC = {"container": {"image_uri": "trainer:1", "command": ["python", "-m", "trainer.task"]}, "chief": {},
        "labels": {"sim-duration-seconds": "86400", "sim-demand-core": "1"}}


def serve_with_pass_log(log: str, argv: list[str]) -> int:
    """`serve`, with every controller pass's time appended to `log` (full: run_once; admission:
    run_admission, woken by submits)."""
    from service.cli.main import main
    from service.lifecycle.loop import BackendLoop

    out = open(log, "a", buffering=1)
    lock = threading.Lock()

    def timed(name: str, method):
        def run(self):
            stats = method(self)
            with lock:
                out.write(f"{time.time():.3f} {name} {stats.seconds:.4f} {stats.polled} {stats.submitted} "
                          f"{int(getattr(stats, 'planned', True))}\n")
            return stats
        return run

    BackendLoop.run_once = timed("full", BackendLoop.run_once)  # type: ignore[method-assign]
    BackendLoop.run_admission = timed("admit", BackendLoop.run_admission)  # type: ignore[method-assign]
    from service.capacity.queue_cache import QueueCache
    compute = QueueCache._compute

    def timed_compute(self, *args):     # each queue computation's end and seconds
        t = time.perf_counter()
        made = compute(self, *args)
        with lock:
            out.write(f"{time.time():.3f} queue {time.perf_counter() - t:.4f} 0 0 0\n")
        return made
    QueueCache._compute = timed_compute  # type: ignore[method-assign]
    import gc
    began: list[float] = []

    def collected(phase: str, info: dict) -> None:     # each full collection's pause (stops every thread)
        if info["generation"] != 2:
            return
        if phase == "start":
            began[:] = [time.perf_counter()]
        elif began:
            with lock:
                out.write(f"{time.time():.3f} gc {time.perf_counter() - began[0]:.4f} {info['collected']} 0 0\n")
    gc.callbacks.append(collected)
    try:
        from service.web.seats import FairSeats
    except ImportError:         # a checkout from before the fair seats
        return main(argv)
    release = FairSeats.release

    def timed_release(self, ticket, seconds: float) -> None:     # a request that held its seat long
        if seconds > 0.015:
            with lock:
                out.write(f"{time.time():.3f} seat {seconds:.4f} 0 0 0\n")
        release(self, ticket, seconds)
    FairSeats.release = timed_release  # type: ignore[method-assign]
    return main(argv)


def ok(r: httpx.Response) -> dict:
    if r.status_code >= 300:
        raise SystemExit(f"bench: {r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    return r.json() if r.content else {}


def copy_waiting(url: str, job_ids: list[str], copies: int) -> dict[str, list[str]]:
    """`copies` more of each waiting job, each with its own id, later than the one before."""
    from sqlalchemy import insert, select

    from service.persistence.models import Job
    from service.persistence.session import make_engine, make_session_factory

    engine = make_engine(url)
    made: dict[str, list[str]] = {}
    with make_session_factory(engine)() as s:
        for jid in job_ids:
            row = s.execute(select(Job).where(Job.id == uuid.UUID(jid))).scalar_one()
            assert row.state == "QUEUED" and row.launch_attempted_at is None, (row.state, row.launch_attempted_at)
            base = {c.key: getattr(row, c.key) for c in Job.__table__.columns}
            rows = [base | {"id": uuid.uuid4(), "display_name": f"{row.display_name}-{k}", "idempotency_key": None,
                            "request_hash": None, "created_at": row.created_at + timedelta(milliseconds=k + 1),
                            "updated_at": row.created_at + timedelta(milliseconds=k + 1)} for k in range(copies)]
            for k in range(0, len(rows), 1000):
                s.execute(insert(Job), rows[k:k + 1000])
            made[jid] = [str(r["id"]) for r in rows]
        s.commit()
    engine.dispose()
    return made


def passes(log: Path, since: float, until: float) -> dict:
    """The full passes' times in the window; `planned`: those that asked the planner (the others
    found nothing changed since a plan that decided nothing: lifecycle/quiet.py)."""
    rows = [p for p in (line.split() for line in log.read_text().splitlines()) if since <= float(p[0]) <= until]
    full = [float(p[2]) for p in rows if p[1] == "full"]
    planned = [float(p[2]) for p in rows if p[1] == "full" and (len(p) < 6 or p[5] == "1")]
    if not full:
        return {"full_passes": 0}
    out = {"full_passes": len(full), "pass_s_median": round(statistics.median(full), 3),
           "pass_s_p90": round(sorted(full)[int(len(full) * 0.9)], 3), "pass_s_max": round(max(full), 3),
           "admission_passes": sum(1 for p in rows if p[1] == "admit"), "planned_passes": len(planned)}
    if planned:
        out |= {"planned_s_median": round(statistics.median(planned), 3), "planned_s_max": round(max(planned), 3)}
    return out


def computations(log: Path, since: float, until: float) -> list[tuple[float, float]]:
    """The queue's computations that ended in the window: (began, ended), wall clock."""
    rows = [p for p in (line.split() for line in log.read_text().splitlines()) if p[1] == "queue"]
    return [(float(p[0]) - float(p[2]), float(p[0])) for p in rows if since <= float(p[0]) <= until]


def planned_spans(log: Path, since: float, until: float) -> list[tuple[float, float]]:
    """The controller's passes that planned (asked the planner) and ended in the window: (began, ended)."""
    rows = [p for p in (line.split() for line in log.read_text().splitlines())
            if p[1] not in ("queue", "gc", "seat") and p[5] == "1"]
    return [(float(p[0]) - float(p[2]), float(p[0])) for p in rows if since <= float(p[0]) <= until]


def slow_beside(timeline: list, start: float, spans: list[tuple[float, float]], over: float = 0.2,
                planned: list[tuple[float, float]] | None = None) -> dict:
    """Of the reads slower than `over`, how many overlapped a queue computation, a controller's
    pass that planned, and neither."""
    slow = [(start + t, start + t + d) for t, _, d in timeline if d > over]

    def hits(a: float, b: float, within: list[tuple[float, float]]) -> bool:
        return any(a < e and s < b for s, e in within)
    beside = sum(1 for a, b in slow if hits(a, b, spans))
    out = {"slow_reads": len(slow), "beside_a_computation": beside}
    if planned is not None:
        out |= {"beside_a_planned_pass": sum(1 for a, b in slow if hits(a, b, planned)),
                "beside_neither": sum(1 for a, b in slow if not hits(a, b, spans) and not hits(a, b, planned))}
    return out


def cancel_latencies(c: httpx.Client, job_ids: list[str], headers: dict) -> list[float]:
    """Seconds from each cancel's 202 to the job's CANCELLED, one job at a time, 1 s apart: the
    cancel wakes the controller, whose pass (whatever it is doing) settles it."""
    out = []
    for jid in job_ids:
        time.sleep(1.0)   # spread over the passes, so each cancel lands at a different point of one
        t0 = time.perf_counter()
        ok(c.post(f"/v1/jobs/{jid}/cancel", headers=headers))
        for _ in range(3000):
            if ok(c.get(f"/v1/jobs/{jid}", headers=headers))["state"] == "CANCELLED":
                break
            time.sleep(0.01)
        out.append(time.perf_counter() - t0)
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))] * 1000, 1) if xs else float("nan")


def timed_gets(c: httpx.Client, path: str, n: int | None = None, stop: threading.Event | None = None,
               every: float = 0.0, began: list[float] | None = None) -> list[float]:
    """GETs one after the other, each `every` seconds after the last one began (0: back to back);
    `began` gets each one's start (wall clock)."""
    out = []
    while (n is not None and len(out) < n) or (stop is not None and not stop.is_set()):
        if began is not None:
            began.append(time.time())
        t0 = time.perf_counter()
        r = c.get(path)
        out.append(time.perf_counter() - t0)
        if every > out[-1]:
            time.sleep(every - out[-1])
        if r.status_code != 200:
            raise SystemExit(f"bench: GET {path}: {r.status_code} {r.text[:300]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--held", type=int, default=2000, help="jobs held by their teams' limits (20 teams)")
    ap.add_argument("--waiting", type=int, default=10_000, help="jobs waiting for capacity (50 teams)")
    ap.add_argument("--seconds", type=float, default=60, help="each measuring window (60: 300 of the other "
                                                               "team's GETs at --other-every 0.2, for its p99)")
    ap.add_argument("--cancels", type=int, default=5, help="running jobs of the other team cancelled, 1 s apart")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--readers-in-process", action="store_true",
                    help="the 8 readers as threads of the bench's own process (before: they shared its GIL with "
                         "the other team's timed GETs)")
    ap.add_argument("--other-every", type=float, default=0.2,
                    help="seconds between the other team's GETs (0: back to back, a load generator of its own)")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: another TRAINJOBS_NAME for serve")
    ap.add_argument("--profile", help="FILE: py-spy's collapsed stacks of serve during the window of point 3 "
                                      "(and FILE.readers: of point 4)")
    ap.add_argument("--py-spy", default="py-spy")
    args = ap.parse_args()
    held = [f"held{i:02d}" for i in range(HELD_TEAMS)]
    waiting = [f"wait{i:02d}" for i in range(WAIT_TEAMS)]
    teams = held + waiting + ["other"]
    db = f"queue_scale_{os.getpid()}"
    url = fresh_database(db)
    op, admins = tokens(url, teams)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tmp = Path(tempfile.mkdtemp(prefix="queue-scale-"))
    passlog, servelog = tmp / "passes.log", tmp / "serve.log"
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": url, "TRAINJOBS_BACKENDS": '["sim"]',
           "TRAINJOBS_DEFAULT_BACKEND": "sim", "TRAINJOBS_CAPACITY": json.dumps({"sim": {"core": CAPACITY}}),
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_LOG_LEVEL": "WARNING"}
    env |= {f"TRAINJOBS_{k.upper()}": v for k, _, v in (kv.partition("=") for kv in args.set)}
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(passlog), "serve", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"], cwd=ROOT, env=env,
                            stdout=servelog.open("w"), stderr=subprocess.STDOUT)
    H = {t: {"Authorization": f"Bearer {s}"} for t, s in admins.items()}
    out: dict = {"load_start": loadavg()}
    try:
        def up() -> bool:
            try:
                return proc.poll() is not None or httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False
        wait(up, "serve", 120, 0.2)
        if proc.poll() is not None:
            raise SystemExit(f"bench: serve exited: {servelog.read_text()[-2000:]}")
        c = httpx.Client(base_url=base, timeout=60)
        for t in waiting:
            ok(c.put(f"/v1/teams/{t}/shares/sim", json={"nominal": {"core": WAIT_NOMINAL},
                                                          "borrowing_limit": {"core": 0}}, headers={"Authorization": f"Bearer {op}"}))
        for t in held:
            ok(c.put(f"/v1/teams/{t}/limits", json={"max_concurrent_jobs": HELD_LIMIT, "on_exceed": "queue"},
                     headers=H[t]))
        for t in teams:
            ok(c.post("/v1/templates", json={"name": "t", "spec": SPEC}, headers=H[t]))
        wait(lambda: all(c.get("/v1/templates/t", headers=H[t]).status_code == 200 for t in teams), "templates", 60)
        # The other team's plain list, on a service with nothing waiting yet.
        for _ in range(10):
            ok(c.post("/v1/jobs", json={"template": "t"}, headers=H["other"]))
        first_waiting: dict[str, str] = {}
        for t, n in [(t, HELD_LIMIT) for t in held] + [(t, WAIT_NOMINAL) for t in waiting]:
            for _ in range(n):
                ok(c.post("/v1/jobs", json={"template": "t"}, headers=H[t]))
        running = 10 + HELD_TEAMS * HELD_LIMIT + WAIT_TEAMS * WAIT_NOMINAL
        wait(lambda: ok(c.get("/v1/queue?backend=sim&limit=1", headers=H["other"]))["items"][0]["running_jobs"]
             >= running, f"{running} running", 300, 1)
        for t in held + waiting:
            first_waiting[t] = ok(c.post("/v1/jobs", json={"template": "t"}, headers=H[t]))["id"]
        time.sleep(2)   # a few passes: the first waiting jobs stay QUEUED
        empty = timed_gets(httpx.Client(base_url=base, timeout=60, headers=H["other"]), "/v1/jobs", 200)
        made = copy_waiting(url, [first_waiting[t] for t in held], args.held // HELD_TEAMS - 1)
        made |= copy_waiting(url, [first_waiting[t] for t in waiting], args.waiting // WAIT_TEAMS - 1)
        q = ok(c.get("/v1/queue?backend=sim&limit=1", headers=H["other"]))["items"][0]
        print(f"{q['running_jobs']} running, {q['waiting_jobs']} waiting (queue as of {q.get('as_of')}); "
              f"load average {loadavg()}", flush=True)
        time.sleep(5)   # the controller's passes see them, and hold the held teams
        # 3. the passes, nothing else asked of the service
        t0 = time.time()
        spy = subprocess.Popen([args.py_spy, "record", "--pid", str(proc.pid), "--rate", "50", "--format", "raw",
                                "--nonblocking", "-o", args.profile], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) if args.profile else None
        quiet = timed_gets(httpx.Client(base_url=base, timeout=60, headers=H["other"]), "/v1/jobs", None,
                           _after(args.seconds), args.other_every)
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
        out["passes_quiet"] = passes(passlog, t0, time.time())
        print(f"3. passes with {args.held} held and {args.waiting} waiting: {out['passes_quiet']}; "
              f"load average {loadavg()}", flush=True)
        # 3. a cancel is never delayed by a long pass: the other team's running jobs, one a second
        t0 = time.time()
        other_jobs = [j["id"] for j in ok(c.get("/v1/jobs?limit=100", headers=H["other"]))["items"]
                      if j["state"] == "RUNNING"][:args.cancels]
        cancels = cancel_latencies(c, other_jobs, H["other"])
        out["cancel_s"] = [round(x, 3) for x in cancels]
        out["passes_cancels"] = passes(passlog, t0, time.time())
        print(f"3. cancels (to CANCELLED, s): {out['cancel_s']}; passes meanwhile {out['passes_cancels']}", flush=True)
        # 4. 8 readers
        stop = threading.Event()
        lat: dict[str, list[float]] = {"queue": [], "job": [], "other": []}
        timeline: list[tuple[float, str, float]] = []   # (started, s after the readers began; kind; seconds)
        lock = threading.Lock()
        unplaced: list[float] = []

        def reader(i: int) -> None:
            team = waiting[i]
            ids = [first_waiting[team], *made[first_waiting[team]]]
            rng = random.Random(i)
            with httpx.Client(base_url=base, timeout=60, headers=H[team]) as rc:
                while not stop.is_set():
                    kind = rng.choice(["queue", "job"])
                    path = (f"/v1/queue?backend=sim&limit=1000&offset={rng.randrange(0, args.waiting, 1000)}"
                            if kind == "queue" else f"/v1/jobs/{rng.choice(ids)}")
                    t = time.perf_counter()
                    r = rc.get(path)
                    d = time.perf_counter() - t
                    if r.status_code != 200:
                        raise SystemExit(f"bench: GET {path}: {r.status_code} {r.text[:300]}")
                    place = r.json().get("queue") if kind == "job" else {}
                    if place is None:
                        raise SystemExit(f"bench: {path} shows no place in the queue: {r.text[:300]}")
                    with lock:
                        if place.get("position", 0) is None:   # newer than the queue shown: placed by a later one
                            unplaced.append(d)
                        lat[kind].append(d)
                        timeline.append((round(t - w0, 2), kind, round(d, 3)))

        threads: list[threading.Thread] = []

        def readers(conn=None) -> None:
            threads.extend(threading.Thread(target=reader, args=(i,), daemon=True) for i in range(READERS))
            for th in threads:
                th.start()
            if conn is None:
                return
            stop.wait(args.seconds)
            stop.set()
            for th in threads:
                th.join(60)
            conn.send((lat, timeline, unplaced))
            conn.close()

        t0 = time.time()
        w0 = time.perf_counter()
        spy = subprocess.Popen([args.py_spy, "record", "--pid", str(proc.pid), "--rate", "50", "--format", "raw",
                                "--nonblocking", "-o", f"{args.profile}.readers"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) if args.profile else None
        # The readers run in a process of their own (forked), so that the other team's timed GETs below
        # share no GIL with them: 8 reader threads reading 1,000-entry pages held this process's GIL,
        # and the other team's latency counted the bench's own wait for it. --readers-in-process: as before.
        got = None
        if args.readers_in_process:
            readers()
        else:
            ctx = multiprocessing.get_context("fork")
            got, sent = ctx.Pipe(duplex=False)
            child = ctx.Process(target=readers, args=(sent,), daemon=True)
            child.start()
            sent.close()
        other_began: list[float] = []
        lat["other"] = timed_gets(httpx.Client(base_url=base, timeout=60, headers=H["other"]), "/v1/jobs", None,
                                  _after(args.seconds), args.other_every, other_began)
        stop.set()
        if got is not None:
            if not got.poll(args.seconds + 120):
                raise SystemExit("bench: the readers' process sent nothing")
            their_lat, their_timeline, their_unplaced = got.recv()
            lat["queue"], lat["job"] = their_lat["queue"], their_lat["job"]
            timeline.extend(their_timeline)
            unplaced.extend(their_unplaced)
            child.join(60)
        for th in threads:          # --readers-in-process: this process's own
            th.join(60)
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
        out["passes_readers"] = passes(passlog, t0, time.time())
        spans = computations(passlog, t0, time.time())
        out["queue_computations"] = {"n": len(spans), "s_median": round(statistics.median([e - s for s, e in spans]), 3)
                                     if spans else None, "s_max": round(max((e - s for s, e in spans), default=0), 3),
                                     "busy_share": round(sum(e - s for s, e in spans) / (time.time() - t0), 3),
                                     **slow_beside(timeline, t0, spans,
                                                   planned=planned_spans(passlog, t0, time.time()))}
        # The other team's reads over twice the quiet p99: beside what?
        other_timeline = [(b - t0, "other", d) for b, d in zip(other_began, lat["other"], strict=True)]
        out["other_slow"] = slow_beside(other_timeline, t0, spans, over=2 * pct(quiet, 0.99) / 1000,
                                        planned=planned_spans(passlog, t0, time.time()))
        print("the other team's reads (started s, seconds):", [(round(t, 3), round(d, 4)) for t, _, d in other_timeline])
        print("the queue's computations (began s, ended s):", [(round(a - t0, 3), round(b - t0, 3)) for a, b in spans])
        gcs = [(float(p[0]) - float(p[2]), float(p[0])) for p in (line.split() for line in passlog.read_text().splitlines())
               if p[1] == "gc" and t0 <= float(p[0])]
        out["full_gc"] = {"n": len(gcs), "s_max": round(max((b - a for a, b in gcs), default=0), 3),
                          "s_total": round(sum(b - a for a, b in gcs), 3),
                          "other_slow_beside": slow_beside(other_timeline, t0, gcs, over=2 * pct(quiet, 0.99) / 1000)}
        out["load_end"] = loadavg()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    if not args.keep_db:
        drop_database(db)
    out |= {"held": args.held, "waiting": args.waiting, "other_every_s": args.other_every,
            "other_list_reads_readers": len(lat["other"]), "other_list_reads_quiet": len(quiet),
            "get_queue_1000_p50_ms": pct(lat["queue"], 0.5), "get_queue_1000_p99_ms": pct(lat["queue"], 0.99),
            "get_queue_reads": len(lat["queue"]),
            "get_waiting_job_p50_ms": pct(lat["job"], 0.5), "get_waiting_job_p99_ms": pct(lat["job"], 0.99),
            "get_waiting_job_reads": len(lat["job"]), "get_waiting_job_unplaced": len(unplaced),
            "other_list_p99_ms_readers": pct(lat["other"], 0.99), "other_list_p50_ms_readers": pct(lat["other"], 0.5),
            "other_list_p99_ms_quiet": pct(quiet, 0.99), "other_list_p50_ms_quiet": pct(quiet, 0.5),
            "other_list_p99_ms_empty": pct(empty, 0.99), "other_list_p50_ms_empty": pct(empty, 0.5),
            "pass_s_median": out["passes_quiet"].get("pass_s_median"),
            "pass_s_max": out["passes_quiet"].get("pass_s_max"), "pass_log": str(passlog)}
    print(f"4. with {READERS} readers: GET /v1/queue limit 1000 p50/p99 {out['get_queue_1000_p50_ms']}/"
          f"{out['get_queue_1000_p99_ms']} ms ({len(lat['queue'])} reads), a waiting job p50/p99 "
          f"{out['get_waiting_job_p50_ms']}/{out['get_waiting_job_p99_ms']} ms ({len(lat['job'])} reads); "
          f"another team's GET /v1/jobs p50/p99 {out['other_list_p50_ms_readers']}/{out['other_list_p99_ms_readers']} "
          f"ms, without readers {out['other_list_p50_ms_quiet']}/{out['other_list_p99_ms_quiet']} ms, before the "
          f"waiting jobs {out['other_list_p50_ms_empty']}/{out['other_list_p99_ms_empty']} ms; passes meanwhile "
          f"{out['passes_readers']}; the queue's computations {out['queue_computations']}")
    print("reads (started s, kind, seconds), in order of their end:", timeline)
    print(json.dumps(out))


def _after(seconds: float) -> threading.Event:
    done = threading.Event()
    threading.Timer(seconds, done.set).start()
    return done


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        sys.exit(serve_with_pass_log(sys.argv[2], sys.argv[3:]))
    main()
