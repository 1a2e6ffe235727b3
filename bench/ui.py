"""Web UI benchmark: PostgreSQL with 100,000 jobs, the app in this process.

Measures the live feed's shared read (the one query per interval that serves
every open page), the jobs list page, a job page with 1,000 epochs of 4
metrics (server-drawn SVG charts), its live panels, and what recording the
epoch history adds to applying one progress observation.
Run: .venv/bin/python bench/ui.py [--jobs 100000]"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import update  # noqa: E402

from service import jobspec
from service.app import create_app  # noqa: E402
from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.demo import demo_template  # noqa: E402
from service.jobs.epochs import on_change  # noqa: E402
from service.lifecycle.engine import Engine  # noqa: E402
from service.lifecycle.protocol import Observation  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.models import Job, JobEpoch, utcnow  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402
from service.slices import Settings  # noqa: E402
from service.ui.feed import JobFeed  # noqa: E402

ADMIN = os.environ.get("TRAINJOBS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
DB = "trainjobs_bench_ui"


def _apply(session, obs):
    """Through the lifecycle engine, with the epoch history listening as in the app."""
    engine = Engine()
    engine.listen(on_change)
    return engine.apply(session, obs)


def seed(conn_url: str, team_id: uuid.UUID, n: int) -> list[uuid.UUID]:
    demo = demo_template()
    spec = demo.spec.model_dump(mode="json", exclude_none=True)
    params = [p.model_dump(mode="json", exclude_none=True) for p in demo.parameters]
    compiled = json.dumps(jobspec.build(spec, params, {}, None, display_name="bench", labels={})[1].to_json())
    template_id, now = uuid.uuid4(), datetime.now(UTC)
    ids = []
    with psycopg.connect(conn_url) as conn:
        conn.execute("INSERT INTO templates (id, team_id, name, latest_version, created_at, updated_at) "
                     "VALUES (%s, %s, 'mwms-demo', 1, %s, %s)", (template_id, team_id, now, now))
        conn.execute("INSERT INTO template_versions (id, template_id, version, description, spec, parameters, "
                     "created_at, created_by) VALUES (%s, %s, 1, '', %s, %s, %s, 'bench')",
                     (uuid.uuid4(), template_id, json.dumps(spec), json.dumps(params), now))
        buf = io.StringIO()
        for i in range(n):
            jid = uuid.uuid4()
            ids.append(jid)
            at = now - timedelta(days=100) + timedelta(seconds=i * 86.4)
            progress = json.dumps({"epoch": 2, "epochs": 2, "metrics": {"loss": 0.1}})
            row = [jid, team_id, f"bench-{i}", template_id, "mwms-demo", 1, "local", "SUCCEEDED", "{}", "null", "{}",
                   compiled, progress, "bench", at.isoformat(), at.isoformat()]
            buf.write("\t".join(str(v).replace("\\", "\\\\") for v in row) + "\n")
        buf.seek(0)
        with conn.cursor().copy("COPY jobs (id, team_id, display_name, template_id, template_name, template_version, "
                                "backend, state, parameters, overrides, labels, compiled, progress, created_by, "
                                "created_at, updated_at) FROM STDIN") as copy:
            copy.write(buf.read())
        conn.execute("ANALYZE jobs")
    return ids


def timed(fn, n: int) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    args = ap.parse_args()
    base = ADMIN.rsplit("/", 1)[0]
    with psycopg.connect(ADMIN, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{DB}"')
    url = base.replace("postgresql://", "postgresql+psycopg://") + f"/{DB}"
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        sf = make_session_factory(engine)
        with sf() as s:
            team = get_or_create_team(s, "bench")
            _, token = create_token(s, team, "bench", "admin", "bench")
            s.commit()
            team_id = team.id
        t0 = time.perf_counter()
        ids = seed(f"{base}/{DB}", team_id, args.jobs)
        print(f"seeded {args.jobs} jobs in {time.perf_counter() - t0:.1f} s")
        rows = []

        # The feed: 100 jobs changed in the last seconds, the rest long ago.
        with sf() as s:
            s.execute(update(Job).where(Job.id.in_(ids[-100:])).values(updated_at=utcnow()))
            s.commit()
        feed = JobFeed(sf, interval=1.0)
        feed._since = utcnow()
        rows.append(("feed read: the one query per interval (100 of %d jobs changed)" % args.jobs,
                     *timed(feed._read, 200)))

        # Epoch history on the reconciler's path: one observation carrying 20 recent epochs.
        target = ids[-1]
        recent = [{"epoch": e, "steps": 100, "seconds": 3.0, "metrics": {"loss": 1 / e, "accuracy": e / 2000,
                   "val_loss": 1.1 / e, "val_accuracy": e / 2100}, "at": utcnow().isoformat()} for e in range(1, 21)]
        counter = iter(range(21, 10 ** 9))

        def observe(with_epochs: bool):
            e = next(counter)
            progress = {"epoch": e, "epochs": 10 ** 6, "metrics": recent[-1]["metrics"],
                        "recent_epochs": (recent[1:] + [{**recent[-1], "epoch": e}]) if with_epochs else []}
            recent[:] = progress["recent_epochs"] or recent
            with sf() as s:
                _apply(s, Observation(target, progress=progress))
                s.commit()
        rows.append(("apply one progress observation, 20 recent epochs", *timed(lambda: observe(True), 300)))
        import service.jobs.service as jobs_service
        real, jobs_service.record_epoch = jobs_service.record_epoch, lambda *a, **k: 0
        rows.append(("the same without recording the epochs (before this change)", *timed(lambda: observe(True), 300)))
        jobs_service.record_epoch = real
        with sf() as s:
            s.query(JobEpoch).delete()
            s.commit()

        # A job with 1,000 epochs of 4 metrics, drawn as SVG on the server.
        with sf() as s:
            s.add_all(JobEpoch(job_id=target, epoch=e, metrics={"loss": 1 / e, "accuracy": e / 2000,
                                                               "val_loss": 1.1 / e, "val_accuracy": e / 2100},
                               steps=100, seconds=3.0, at=utcnow()) for e in range(1, 1001))
            s.commit()
        settings = Settings(database_url=url, backends=["local"], run_reconciler=False, seed_demo_template=False,
                            local_max_running_jobs=0, local_work_dir=Path("/tmp/trainjobs-bench-ui"),
                            log_level="WARNING")
        with TestClient(create_app(settings)) as client:
            page = client.get("/ui/login")
            csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
            client.post("/ui/login", data={"csrf": csrf, "token": token})
            assert client.get("/ui/jobs").status_code == 200
            rows.append(("GET /ui/jobs (50 of %d jobs)" % args.jobs, *timed(lambda: client.get("/ui/jobs"), 200)))
            size = len(client.get(f"/ui/jobs/{target}").content)
            rows.append((f"GET /ui/jobs/{{id}}, 1,000 epochs x 4 metrics ({size // 1024} KiB)",
                         *timed(lambda: client.get(f"/ui/jobs/{target}"), 50)))
            rows.append(("GET /ui/jobs/{id}/panels (the live refresh)",
                         *timed(lambda: client.get(f"/ui/jobs/{target}/panels"), 50)))
        engine.dispose()
        print("\n| measure | p50 | p99 |\n|---|---|---|")
        for what, p50, p99 in rows:
            print(f"| {what} | {p50:.1f} ms | {p99:.1f} ms |")
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


if __name__ == "__main__":
    main()
