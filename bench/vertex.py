"""Vertex backend benchmark: what following many jobs costs Google, and whether the
service stays within Google's quotas.

Against the fake JobService and Cloud Logging on 127.0.0.1 (real HTTP, the real client
libraries), with jobs submitted through POST /v1/jobs of the real app (SQLite):

1. a controller pass with N running jobs: API calls and wall time when nothing changed,
   when 5% ended, and a naive loop of one get_custom_job per job, for comparison;
2. calls per minute at the default settings (poll every 10 s, progress every 60 s) with
   N running jobs, over simulated minutes (the fakes' clock; passes every 0.5 s);
2b. the same with every job judged for stalls (stall_timeout_seconds), chiefs and workers
   logging every 30 s and one worker never: entries.list per minute (the progress query,
   no extra one) and when the silent worker's job fails (`--only stall_minutes`);
3. a burst of creates: every job POSTed at once, the create budget (30 a minute, 5 at
   once) spreading them out, every waiting job QUEUED with its reason;
4. log followers: F followers of J jobs reading every 0.1 s while lines keep coming,
   Cloud Logging's read quota emulated (60 a minute per project): calls made, calls
   refused by Google, and a person's page now and then.

Run: .venv/bin/python bench/vertex.py [--jobs 1000] [--ticks 5]"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

import service.lifecycle.engine as engine_module  # noqa: E402
import service.lifecycle.loop as loop_module  # noqa: E402
from service.app import create_app  # noqa: E402
from service.demo import demo_template  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.slices import Settings  # noqa: E402
from tests.conftest import bearer, make_token  # noqa: E402
from tests.fakes.cloud_logging import FakeCloudLogging  # noqa: E402
from tests.fakes.vertex_jobs import FakeJobService  # noqa: E402


def measure(fake: FakeJobService, fn) -> tuple[int, float, dict]:
    fake.reset_calls()
    t0 = time.perf_counter()
    fn()
    return fake.total_calls, time.perf_counter() - t0, dict(fake.calls)


@contextmanager
def service(tmp: str, fake: FakeJobService, logs: FakeCloudLogging, **over):
    url = f"sqlite:///{Path(tmp) / f'bench-{time.monotonic_ns()}.db'}"
    migrate.upgrade(url)
    values = dict(database_url=url, backends=["vertex"], default_backend="vertex", run_reconciler=False,
                  seed_demo_template=False, vertex_project=fake.project, vertex_location=fake.location,
                  vertex_api_endpoint=fake.url, logging_api_endpoint=logs.url)
    values.update(over)
    headers = bearer(make_token(url, "bench", "admin"))
    with TestClient(create_app(Settings(**values)), headers=headers) as client:
        r = client.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True))
        assert r.status_code == 201, r.text
        yield client


def simulated(client, fake: FakeJobService, logs: FakeCloudLogging):
    """The service's clocks on the fakes' clock (see tests/fakes/harness.py use_clock)."""
    clock = fake.clock
    engine_module.utcnow = loop_module.utcnow = clock.utcnow
    backend = client.app.state.services.backends["vertex"]
    backend._now, backend._mono, backend.progress._clock = clock.utcnow, clock.monotonic, clock.monotonic
    for bucket in backend.budget.buckets.values():
        bucket._clock = clock.monotonic
    logs.clock = clock
    return clock, backend


def post_jobs(client, n: int, template: str = "mwms-demo") -> list[str]:
    ids = []
    for _ in range(n):
        r = client.post("/v1/jobs", json={"template": template})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    return ids


def launch_all(controller, fake: FakeJobService, n: int) -> int:
    passes = 0
    while fake.calls["create"] < n:
        controller.run_once()
        passes += 1
    return passes


def pass_costs(args, tmp, fake, logs) -> list[tuple]:
    rows = []
    with service(tmp, fake, logs, vertex_list_page_size=args.page_size, reconcile_batch_size=args.batch_size,
                 vertex_poll_interval_seconds=0, vertex_progress_interval_seconds=3600,
                 vertex_create_per_minute=6000, vertex_create_burst=1000,
                 vertex_calls_per_minute=60000, vertex_calls_burst=10000) as client:
        controller = client.app.state.services.controller
        backend = client.app.state.services.backends["vertex"]
        post_jobs(client, args.jobs)
        t0 = time.perf_counter()
        passes = launch_all(controller, fake, args.jobs)
        submit_s = time.perf_counter() - t0
        submit_calls = dict(fake.calls)
        names = list(fake.jobs)
        for name in names:
            fake.set_state(name, "JOB_STATE_RUNNING")
        first = controller.run_once()
        assert first.changed == args.jobs, first
        steady = [measure(fake, controller.run_once) for _ in range(args.ticks)]
        rows.append((f"pass, {args.jobs} running, no change", max(c for c, _, _ in steady),
                     statistics.median(s for _, s, _ in steady), max(s for _, s, _ in steady), steady[0][2]))
        ended = names[::20]
        for i, name in enumerate(ended):
            fake.set_state(name, "JOB_STATE_SUCCEEDED" if i % 2 else "JOB_STATE_FAILED",
                           error=None if i % 2 else (3, "exit status 1"))
        box = {}
        c, s, detail = measure(fake, lambda: box.setdefault("s", controller.run_once()))
        assert box["s"].changed == len(ended), box["s"]
        rows.append((f"pass, {len(ended)} of them ended", c, s, s, detail))
        active = [n for n in names if n not in set(ended)]
        naive = [measure(fake, lambda: [backend.client.get_custom_job(name=n, timeout=10) for n in active])
                 for _ in range(max(1, args.ticks // 2))]
        rows.append((f"naive: one get per job ({len(active)} jobs)", naive[0][0],
                     statistics.median(s for _, s, _ in naive), max(s for _, s, _ in naive), naive[0][2]))
    print(f"\n1. A controller pass: batch {args.batch_size}, page size {args.page_size}; {args.jobs} jobs "
          f"launched by {passes} passes (at most 20 creates a pass) in {submit_s:.1f} s ({submit_calls})\n")
    print(f"| {'what':<40} | {'API calls':>9} | {'wall median':>11} | {'wall max':>8} | calls by method")
    print(f"|{'-' * 42}|{'-' * 11}|{'-' * 13}|{'-' * 10}|{'-' * 30}")
    for what, c, med, mx, detail in rows:
        by = ", ".join(f"{k} {v}" for k, v in sorted(detail.items()))
        print(f"| {what:<40} | {c:>9} | {med:>9.3f} s | {mx:>6.3f} s | {by}")
    return rows


def steady_minutes(args, tmp, fake, logs, minutes: int = 3) -> None:
    """Default poll and progress intervals; passes every 0.5 s of simulated time."""
    with service(tmp, fake, logs, vertex_create_per_minute=6000, vertex_create_burst=1000) as client:
        clock, backend = simulated(client, fake, logs)
        controller = client.app.state.services.controller
        post_jobs(client, args.jobs)
        launch_all(controller, fake, args.jobs)
        for name in list(fake.jobs):
            fake.set_state(name, "JOB_STATE_RUNNING")
        for name in list(fake.jobs)[:200]:   # the chiefs of 200 jobs print an epoch line
            logs.add(name.rsplit("/", 1)[1], "workerpool0-0",
                     {"event": "epoch_end", "epoch": 1, "epochs": 5, "steps": 10, "metrics": {"loss": 0.5}})
        clock.advance(60)
        controller.run_once()
        fake.reset_calls()
        logs.calls.clear()
        passes = int(minutes * 60 / 0.5)
        t0 = time.perf_counter()
        for _ in range(passes):
            clock.advance(0.5)
            controller.run_once()
        wall = time.perf_counter() - t0
        with client.app.state.services.session_factory() as s:
            from service.persistence.models import Job
            with_progress = s.query(Job).filter(Job.progress.is_not(None)).count()
    print(f"\n2. Following {args.jobs} running jobs for {minutes} simulated minutes at the default settings "
          f"({passes} passes, {wall:.1f} s of wall time)\n")
    print("| calls per minute | Vertex list | Vertex get | Cloud Logging entries.list | quota (ours / Google's) |")
    print("|---|---|---|---|---|")
    print(f"| | {fake.calls['list'] / minutes:.1f} | {fake.calls['get'] / minutes:.1f} | "
          f"{logs.calls['list'] / minutes:.1f} | Vertex calls 120 / ~600, entries.list 30 / 60 |")
    print(f"\njobs showing progress from Cloud Logging: {with_progress}")


def stall_minutes(args, tmp, fake, logs, minutes: int = 4, stall: int = 120) -> None:
    """As 2, every job with scheduling.stall_timeout_seconds (its chief's and worker's every
    line read with the progress query), each chief and worker logging a line every 30 s; one
    job's worker never logs: entries.list per minute, and when that job fails."""
    with service(tmp, fake, logs, vertex_create_per_minute=6000, vertex_create_burst=1000) as client:
        body = demo_template().model_dump(mode="json", exclude_none=True)
        body["name"] = "mwms-stall"
        body["spec"]["scheduling"] = {"timeout_seconds": 3600, "stall_timeout_seconds": stall}
        assert client.post("/v1/templates", json=body).status_code == 201
        clock, backend = simulated(client, fake, logs)
        controller = client.app.state.services.controller
        ids = post_jobs(client, args.jobs, "mwms-stall")
        launch_all(controller, fake, args.jobs)
        for name in list(fake.jobs):
            fake.set_state(name, "JOB_STATE_RUNNING")
        numerics = [name.rsplit("/", 1)[1] for name in fake.jobs]
        silent = numerics[0]

        def lines() -> None:
            for n in numerics:
                logs.add(n, "workerpool0-0", "Epoch 1/5 - loss: 0.5", timestamp_ns=clock.now_ns())
                if n != silent:
                    logs.add(n, "workerpool1-0", "Epoch 1/5 - loss: 0.5", timestamp_ns=clock.now_ns())

        controller.run_once()
        fake.reset_calls()
        logs.calls.clear()
        t0 = time.perf_counter()
        failed_after = None
        # The fakes' clock is real time plus what the bench adds: a pass over 1,000 jobs takes
        # real time too, so lines go out by the clock (every 30 s of it), not by pass count,
        # and the run lasts `minutes` of that clock.
        start_ns = clock.now_ns()
        next_lines = start_ns
        passes = 0
        while clock.now_ns() - start_ns < minutes * 60e9:
            clock.advance(0.5)
            passes += 1
            if clock.now_ns() >= next_lines:
                lines()
                next_lines += 30e9
            controller.run_once()
            if failed_after is None and passes % 4 == 0:
                with client.app.state.services.session_factory() as s:
                    from service.persistence.models import Job
                    if s.get(Job, __import__("uuid").UUID(ids[0])).state == "FAILED":
                        failed_after = round((clock.now_ns() - start_ns) / 1e9, 1)
        minutes = (clock.now_ns() - start_ns) / 60e9
        wall = time.perf_counter() - t0
        with client.app.state.services.session_factory() as s:
            from service.persistence.models import Job
            others = s.query(Job).filter(Job.state == "FAILED").count() - (failed_after is not None)
    print(f"\n2b. As 2, every job with stall_timeout_seconds ({stall} s; one worker never logs), "
          f"each chief and worker logging a line every 30 s ({passes} passes, {wall:.1f} s of wall time)\n")
    print("| calls per minute | Vertex list | Cloud Logging entries.list | entries read per minute | quota |")
    print("|---|---|---|---|---|")
    print(f"| | {fake.calls['list'] / minutes:.1f} | {logs.calls['list'] / minutes:.1f} | "
          f"{len(logs.entries) / minutes:.0f} written | entries.list 30 / 60 |")
    print(f"\nthe silent worker's job FAILED after: {failed_after} s of RUNNING (timeout {stall} s + read interval 60 s); other jobs FAILED: {others}")


def create_burst(args, tmp, fake, logs, burst_jobs: int = 100) -> None:
    with service(tmp, fake, logs) as client:
        clock, backend = simulated(client, fake, logs)
        controller = client.app.state.services.controller
        fake.reset_calls()
        t0 = time.perf_counter()
        ids = post_jobs(client, burst_jobs)
        post_s = time.perf_counter() - t0
        per_minute: list[int] = []
        reasons: set[str] = set()
        start = clock.monotonic()
        minute_calls = 0
        while fake.calls["create"] < burst_jobs and clock.monotonic() - start < 600:
            before = fake.calls["create"]
            controller.run_once()
            minute_calls += fake.calls["create"] - before
            waiting = [client.get(f"/v1/jobs/{i}").json() for i in ids[fake.calls["create"]:][:1]]
            reasons.update(w["waiting_reason"] for w in waiting if w.get("waiting_reason"))
            clock.advance(0.5)
            if clock.monotonic() - start >= 60 * (len(per_minute) + 1):
                per_minute.append(minute_calls)
                minute_calls = 0
        per_minute.append(minute_calls)
        took = clock.monotonic() - start
        duplicates = sum(1 for i in ids if len(fake.find(i)) != 1)
    print(f"\n3. {burst_jobs} jobs POSTed at once ({post_s:.2f} s for the POSTs; no request waits on Google)\n")
    print("| creates in minute 1, 2, ... | all created after | CustomJobs not exactly one | waiting reason |")
    print("|---|---|---|---|")
    minutes = ", ".join(map(str, per_minute))
    print(f"| {minutes} | {took:.0f} s simulated | {duplicates} | {' / '.join(sorted(reasons))} |")


def followers(args, tmp, fake, logs, jobs: int = 5, per_job: int = 4, seconds: int = 120) -> None:
    logs.quota_per_minute = 60
    with service(tmp, fake, logs, vertex_create_per_minute=6000, vertex_create_burst=1000,
                 vertex_poll_interval_seconds=0) as client:
        clock, backend = simulated(client, fake, logs)
        controller = client.app.state.services.controller
        ids = post_jobs(client, jobs)
        controller.run_once()
        for name in list(fake.jobs):
            fake.set_state(name, "JOB_STATE_RUNNING")
        controller.run_once()
        handles = {}
        import uuid

        from service.lifecycle.handles import handle_of_job
        from service.persistence.models import Job
        with client.app.state.services.session_factory() as s:
            for i in ids:
                handles[i] = handle_of_job(s.get(Job, uuid.UUID(i)))
        numeric = {i: handles[i].backend_ref.rsplit("/", 1)[1] for i in ids}
        for i in ids:
            logs.add(numeric[i], "workerpool0-0", "started", timestamp_ns=logs.clock.now_ns())
        # Each job's followers start where its first page ended (as after connecting).
        first = {i: backend.read_logs(handles[i], replica=None, since=None, limit=1000).cursor for i in ids}
        cursors = {(i, k): first[i] for i in ids for k in range(per_job)}
        logs.calls.clear()
        logs.refused = 0
        refused_before = logs.refused
        pages, pages_ok, lines_written = 0, 0, 0
        t0 = time.perf_counter()
        for step in range(seconds * 10):
            clock.advance(0.1)
            if step % 5 == 0:
                for i in ids:
                    logs.add(numeric[i], "workerpool0-0", f"step {step}", timestamp_ns=logs.clock.now_ns())
                    lines_written += 1
            for (i, k), cursor in list(cursors.items()):
                try:
                    page = backend.read_logs(handles[i], replica=None, since=cursor, limit=1000)
                    cursors[(i, k)] = page.cursor
                except Exception:  # noqa: BLE001 - a follower's read never raises; counted if it did
                    pass
            if step % 100 == 0:
                pages += 1
                r = client.get(f"/v1/jobs/{ids[0]}/logs", params={"limit": 10})
                pages_ok += r.status_code == 200
        wall = time.perf_counter() - t0
    minutes = seconds / 60
    print(f"\n4. {jobs * per_job} followers of {jobs} jobs, reading every 0.1 s for {seconds} simulated s "
          f"({wall:.1f} s wall), Cloud Logging's quota of 60 a minute emulated\n")
    print("| entries.list per minute | refused by Google (429) | a person's pages answered | lines written |")
    print("|---|---|---|---|")
    print(f"| {logs.calls['list'] / minutes:.1f} (budget 30, of which followers 15) | {logs.refused - refused_before} "
          f"| {pages_ok} of {pages} | {lines_written} |")


def seed_running(client, fake: FakeJobService, n: int, *, ended: int = 0) -> list[str]:
    """n launched RUNNING jobs, stored as the controller leaves them, and their CustomJobs in the
    fake: one job POSTed and launched, its row copied n - 1 times (POSTing 10,000 jobs and
    creating them 20 a pass would take the bench most of an hour). Plus `ended` ended
    CustomJobs of other jobs of ours in the project."""
    from datetime import timedelta

    from sqlalchemy import insert, select

    from service.persistence.models import Job
    controller = client.app.state.services.controller
    [first] = post_jobs(client, 1)
    controller.run_once()
    factory = client.app.state.services.session_factory
    with factory() as s:
        row = s.execute(select(Job.__table__).where(Job.id == uuid.UUID(first))).mappings().one()
        base = dict(row)
        ids = [first] + [str(uuid.uuid4()) for _ in range(n - 1)]
        names = fake.seed(n - 1, job_ids=ids[1:])
        start = base["created_at"] - timedelta(hours=1)
        rows = []
        for i, (jid, name) in enumerate(zip(ids[1:], names, strict=True)):
            values = {**base, "id": uuid.UUID(jid), "backend_ref": name, "state": "RUNNING",
                      "created_at": start + timedelta(milliseconds=i), "idempotency_key": None}
            rows.append(values)
        for i in range(0, len(rows), 1000):
            s.execute(insert(Job.__table__), rows[i:i + 1000])
        s.commit()
    fake.set_state(first, "JOB_STATE_RUNNING")
    if ended:
        fake.seed(ended, state="JOB_STATE_SUCCEEDED")
    return ids


def oldest_state_age(client, now) -> float:
    from sqlalchemy import func, select

    from service.persistence.models import Job
    if not hasattr(Job, "state_observed_at"):
        return float("nan")   # run on a commit before issue 39 (for the "before" figures)
    with client.app.state.services.session_factory() as s:
        oldest, unseen = s.execute(select(func.min(Job.state_observed_at),
                                          func.count().filter(Job.state_observed_at.is_(None)))
                                   .where(Job.state == "RUNNING")).one()
    return float("inf") if unseen or oldest is None else (now - oldest).total_seconds()


def budget_scale(args, tmp, fake, logs, sizes=((300, 120), (3000, 120), (10000, 120), (3000, 20)),
                 minutes: float = 2.0, step: float = 1.0) -> None:
    """Issue 39, point 2: the default Vertex call budget (120 a minute) with N running jobs:
    calls per minute, the oldest state (the job view's state_observed_at), and how long a new
    job waits for its create, a job POSTed every 15 simulated s meanwhile. Passes every
    `step` simulated s (the controller's are 0.5 s apart; coarser here so 10,000 jobs run in
    minutes); one simulated minute to warm up, then `minutes` measured."""
    rows = []
    for n, budget in ([(n, 120) for n in args.sizes] if args.sizes else sizes):
        with FakeJobService() as fake, FakeCloudLogging() as logs, \
                service(tmp, fake, logs, vertex_calls_per_minute=budget) as client:
            clock, backend = simulated(client, fake, logs)
            controller = client.app.state.services.controller
            seed_running(client, fake, n)
            t0 = time.perf_counter()
            for _ in range(int(60 / step)):                 # warm-up: every job observed once
                clock.advance(step)
                controller.run_once()
            fake.reset_calls()
            start, ages, latencies, waiting = clock.monotonic(), [], [], {}
            passes = 0
            while clock.monotonic() - start < minutes * 60:
                if passes % int(15 / step) == 0:
                    [jid] = post_jobs(client, 1)
                    waiting[jid] = clock.monotonic()
                clock.advance(step)
                controller.run_once()
                passes += 1
                for jid, posted in list(waiting.items()):
                    if fake.find(jid):
                        latencies.append(clock.monotonic() - posted)
                        del waiting[jid]
                if passes % int(5 / step) == 0:
                    ages.append(oldest_state_age(client, clock.utcnow()))
            took = clock.monotonic() - start
            wall = time.perf_counter() - t0
            calls = dict(fake.calls)
            per_minute = fake.total_calls / (took / 60)
            rows.append((n, budget, per_minute, calls, max(ages), statistics.median(ages), max(latencies), getattr(backend.poller, "listings", 0),
                         wall, passes))
    print(f"\n5. The Vertex call budget (TRAINJOBS_VERTEX_CALLS_PER_MINUTE, default 120; the other settings at "
          f"their defaults: poll interval 10 s, page size 1000): N running jobs for {minutes:g} simulated minutes after one of warm-up, passes every {step:g} s, "
          f"a job POSTed every 15 s\n")
    print("| running jobs | budget a minute | Vertex calls per minute | calls by method | oldest state, max / median | "
          "create latency, max | listings | wall |")
    print("|---|---|---|---|---|---|---|---|")
    for n, budget, pm, calls, age_max, age_med, lat, listings, wall, passes in rows:
        by = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
        print(f"| {n:,} | {budget} | {pm:.1f} | {by} | {age_max:.0f} s / {age_med:.0f} s | {lat:.1f} s | {listings} "
              f"| {wall:.0f} s ({passes} passes) |")


def ended_lookup(args, tmp, fake, logs, ended: int = 1200) -> None:
    """Issue 39: a job whose CustomJob ended, beside `ended` ended CustomJobs of ours: what
    finding it costs (it left the running list; it is looked up by its label)."""
    with service(tmp, fake, logs) as client:
        clock, backend = simulated(client, fake, logs)
        controller = client.app.state.services.controller
        [jid] = seed_running(client, fake, 1, ended=ended)
        clock.advance(11)
        controller.run_once()
        fake.set_state(jid, "JOB_STATE_SUCCEEDED")
        fake.reset_calls()
        clock.advance(11)
        controller.run_once()
        state = client.get(f"/v1/jobs/{jid}").json()["state"]
        calls = dict(fake.calls)
    print(f"\n6. A job that ended beside {ended:,} ended CustomJobs of ours: the pass that finds it\n")
    print("| calls | by method | the job's state after the pass |")
    print("|---|---|---|")
    print(f"| {sum(calls.values())} | {', '.join(f'{k} {v}' for k, v in sorted(calls.items()))} | {state} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=5, help="steady passes to time (median and max reported)")
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--only", help="run one part: pass_costs, steady_minutes, stall_minutes, create_burst, followers, "
                                   "budget_scale, ended_lookup")
    ap.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")],
                    help="budget_scale: running jobs, e.g. 300,3000,10000 (the default)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        parts = (pass_costs, steady_minutes, stall_minutes, create_burst, followers, budget_scale, ended_lookup)
        if args.only:
            parts = [p for p in parts if p.__name__ == args.only]
        for part in parts:
            with FakeJobService() as fake, FakeCloudLogging() as logs:
                part(args, tmp, fake, logs)
    print()


if __name__ == "__main__":
    main()
