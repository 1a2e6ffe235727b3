"""Profile POST /v1/jobs in process: the whole ASGI app (middlewares, FastAPI,
auth, template, compile, inserts, response) against a real PostgreSQL.

Threads are what cProfile cannot follow, so anyio's to_thread.run_sync and the lean
routes' in_thread run the sync endpoint and dependencies inline on the event loop thread here (the only
change from serving; the database round trips are real). Prints the functions
with the most cumulative time per request and the Python time per request.
Run: .venv/bin/python bench/profile_submit.py [--requests 2000] [--top 40 (0: time only)] [--sqlite]"""
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
from service.core.config import Settings  # noqa: E402
from service.jobs import router as jobs_router  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402

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


async def run(app, token: str, n: int, top: int | None, out: str | None = None) -> None:
    async with app.router.lifespan_context(app):
        for _ in range(50):  # warm: caches, statement cache, pool
            assert await post(app, token) == 201
        # CPU time, not wall: one worker is bound by its Python time (the GIL); waits on
        # the database overlap with other requests' Python under load.
        prof = cProfile.Profile(time.process_time)
        t0, c0 = time.perf_counter(), time.process_time()
        if top:
            prof.enable()
        for _ in range(n):
            await post(app, token)
        prof.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{n} requests, {'profiled' if top else 'not profiled'}: {wall / n * 1e3:.2f} ms wall, "
          f"{cpu / n * 1e3:.2f} ms CPU per request")
    if not top:
        return
    if out:
        prof.dump_stats(out)
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--top", type=int, default=40, help="0: no profile, only the time per request")
    ap.add_argument("--sqlite", action="store_true")
    ap.add_argument("--out", help="also write the raw profile here (pstats format)")
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
        asyncio.run(run(create_app(settings), token, args.requests, args.top, args.out))
    finally:
        if not args.sqlite:
            with psycopg.connect(ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
