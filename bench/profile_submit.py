"""Profile POST /v1/jobs in process: the whole ASGI app (middlewares, FastAPI,
auth, template, compile, inserts, response) against a real PostgreSQL.

Threads are what cProfile cannot follow, so anyio's to_thread.run_sync and the lean
routes' in_thread run the sync endpoint and dependencies inline on the event loop thread here (the only
change from serving; the database round trips are real). Prints the functions
with the most cumulative time per request and the Python time per request.
Run: .venv/bin/python bench/profile_submit.py [--requests 2000] [--top 40 (0: time only)] [--parts] [--sqlite]"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio.to_thread
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service import demo
from service.app import create_app  # noqa: E402
from service.auth.service import bootstrap_admin  # noqa: E402
from service.jobs import router as jobs_router  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402
from service.slices import Settings  # noqa: E402

ADMIN = os.environ.get("TRAINJOBS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BODY = json.dumps({"template": "mwms-demo", "parameters": {"epochs": 3}}).encode()


async def _inline(func, *args, abandon_on_cancel=False, cancellable=None, limiter=None):
    return func(*args)


async def _inline_lean(request, func, *args, **kwargs):
    return func(*args, **kwargs)


async def post(app, token: str) -> int:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/v1/jobs", "raw_path": b"/v1/jobs", "root_path": "",
             "query_string": b"", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(BODY)).encode()),
                         (b"authorization", f"Bearer {token}".encode())]}
    sent = False
    status = []

    async def receive():
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


async def run(app, token: str, n: int, top: int | None, out: str | None = None, parts: bool = False) -> None:
    async with app.router.lifespan_context(app):
        for _ in range(50):  # warm: caches, statement cache, pool
            assert await post(app, token) == 201
        # CPU time, not wall: one worker is bound by its Python time (the GIL); waits on
        # the database overlap with other requests' Python under load.
        plain = 0.0
        if parts:  # the CPU per request without the profiler, to scale its shares to
            c0 = time.process_time()
            for _ in range(n):
                await post(app, token)
            plain = time.process_time() - c0
        prof = cProfile.Profile(time.process_time)
        t0, c0 = time.perf_counter(), time.process_time()
        if top or parts:
            prof.enable()
        for _ in range(n):
            await post(app, token)
        prof.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{n} requests, {'profiled' if top else 'not profiled'}: {wall / n * 1e3:.2f} ms wall, "
          f"{cpu / n * 1e3:.2f} ms CPU per request")
    if not top and not parts:
        return
    if out:
        prof.dump_stats(out)
    stats = pstats.Stats(prof)
    if parts:
        print_parts(stats, n, plain)
        return
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


# Where a submit's time goes: each part is a function's cumulative time (or the difference
# of two nested ones), matched by file suffix and function name.
_MARKS = {
    "request": ("bench/profile_submit.py", "post"),
    "route": ("fastapi/routing.py", "app"),           # the route's handler (the innermost `app`)
    "endpoint": ("service/jobs/router.py", "create_job"),
    "input": ("service/jobs/submit_input.py", "submit_input"),   # the route's own reading of its request
    "unit": ("service/jobs/router.py", "_create_in_unit"),
    "submit_view": ("service/jobs/router.py", "submit"),
    "submit": ("service/jobs/submitter.py", "submit"),
    "compile": ("service/jobs/submitter.py", "_build"),      # the pre-check is not inside it
    "precheck": ("service/jobs/precheck.py", "for_submit"),
    "price": ("service/jobs/compile_reuse.py", "cost"),    # the estimate, or a copy of the one kept
    "store": ("service/jobs/submitter.py", "_store"),
    "answer": ("service/jobs/router.py", "job_out"),
}


def print_parts(stats: pstats.Stats, n: int, cpu: float) -> None:
    """Per request, scaled from the profile's shares to the unprofiled CPU time (cProfile
    inflates many small calls more than a few big ones: read the shares, not the µs)."""
    cum: dict[str, float] = {}
    for (path, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for key, (suffix, fn) in _MARKS.items():
            if name == fn and path.endswith(suffix):
                # Several nested functions are called `app` in FastAPI's routing: the innermost (the
                # route's handler) is the one with the least time; the others wrap it.
                cum[key] = min(cum.get(key, ct), ct) if key == "route" else max(cum.get(key, 0.0), ct)
    rows = [
        ("HTTP stack: middlewares, routing", cum["request"] - cum["route"]),
        ("FastAPI + the route's own input (body, query, header, token)",
         cum["route"] - cum["endpoint"] + cum.get("input", 0.0)),
        ("request thread trip, session open/close", cum["endpoint"] - cum.get("input", 0.0) - cum["submit_view"]),
        # A repeat submit runs no pre-check (jobs.precheck.guard): 0 in the steady state.
        ("pre-check (first submit of a template, or a failed guard)", cum.get("precheck", 0.0)),
        ("compile: parameters, CustomJob, checks", cum["compile"]),
        ("price (kept from the first submit of the same values)", cum["price"]),
        ("store: values, the guarded insert statement, commit", cum["store"]),
        ("other submit work (idempotency, limits)",
         cum["submit"] - cum.get("precheck", 0.0) - cum["compile"] - cum["price"] - cum["store"]),
        ("answer: job view (replica env), JSON", cum["submit_view"] - cum["submit"]),
    ]
    total = cum["request"]
    print(f"{'part':<62} {'share':>6} {'µs/request':>10}")
    for label, t in rows:
        print(f"{label:<62} {t / total:>6.1%} {t / total * cpu / n * 1e6:>10.0f}")
    print(f"{'total (CPU, unprofiled)':<62} {'':>6} {cpu / n * 1e6:>10.0f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--top", type=int, default=40, help="0: no profile, only the time per request")
    ap.add_argument("--sqlite", action="store_true")
    ap.add_argument("--out", help="also write the raw profile here (pstats format)")
    ap.add_argument("--parts", action="store_true",
                    help="a table of where the time goes (CPU per request by part), then the CPU unprofiled")
    args = ap.parse_args()
    anyio.to_thread.run_sync = _inline
    jobs_router.in_thread = _inline_lean   # the job routes' request threads (service/web/request_threads.py)
    tmp = tempfile.mkdtemp()
    os.chmod(tmp, 0o711)  # local replicas (never started here) pass through it as other uids
    name = f"trainjobs_profile_{uuid.uuid4().hex[:8]}"
    if args.sqlite:
        url = f"sqlite:///{tmp}/p.db"
    else:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + name
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        with make_session_factory(engine)() as session:
            token = bootstrap_admin(session)
            demo.seed(session)
        engine.dispose()
        settings = Settings(database_url=url, backends=["local"], local_work_dir=Path(tmp) / "runs",
                            local_max_running_jobs=0, run_reconciler=False, log_level="WARNING")
        asyncio.run(run(create_app(settings), token, args.requests, args.top, args.out, args.parts))
    finally:
        if not args.sqlite:
            with psycopg.connect(ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
