"""GET /v1/queue's cost (issue 38, Visibility): one computation of a backend's queue (the
planner's snapshot read from the database, then the scheduler's decision) with N waiting jobs
of 50 teams, and a cached read after it, as a member's GET answers them (limit 100).

Run: .venv/bin/python bench/queue_read.py [--jobs 10000] [--url postgresql+psycopg://...]
(default: a fresh SQLite file). The last line is one JSON object with the figures."""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from service.app import create_app
from service.auth.service import create_token, get_or_create_team
from service.demo import demo_template
from service.persistence import migrate
from service.persistence.models import BackendCapacity, Job
from service.persistence.session import make_engine, make_session_factory
from service.slices import Settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--url")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="queue-bench-"))
    tmp.chmod(0o711)   # the local backend's replicas (never started here) must be able to pass through
    url = args.url or f"sqlite:///{tmp / 'bench.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    with factory() as s:
        secret = create_token(s, get_or_create_team(s, "team00"), "bench", "admin", "bench")[1]
        teams = [get_or_create_team(s, f"team{i:02d}") for i in range(50)]
        s.add(BackendCapacity(backend="local", resource="core", amount=64))
        s.commit()
    settings = Settings(database_url=url, backends=["local"], local_work_dir=tmp / "runs", local_max_running_jobs=0,
                        run_reconciler=False, seed_demo_template=False, queue_cache_seconds=60)
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {secret}"}) as c:
        assert c.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True)).status_code == 201
        first = c.post("/v1/jobs", json={"template": "mwms-demo"}).json()["id"]
        with factory() as s:
            row = s.execute(select(Job).where(Job.id == uuid.UUID(first))).scalar_one()
            base = {col.key: getattr(row, col.key) for col in Job.__table__.columns}
            rng = random.Random(7)
            rows = [base | {"id": uuid.uuid4(), "team_id": rng.choice(teams).id, "display_name": f"j{i}",
                            "demand": {"core": rng.choice([1, 2, 4, 8])}, "priority": rng.choice([0, 0, 10])}
                    for i in range(args.jobs - 1)]
            for k in range(0, len(rows), 1000):
                s.execute(insert(Job), rows[k:k + 1000])
            s.commit()
        cache = c.app.state.services.queue
        computed, cached = [], []
        for _ in range(args.repeat):
            cache._entries.clear()   # a stale entry: the next read computes
            t0 = time.perf_counter()
            r = c.get("/v1/queue?backend=local")
            computed.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            c.get("/v1/queue?backend=local")
            cached.append((time.perf_counter() - t0) * 1000)
        body = r.json()["items"][0]
    engine.dispose()
    out = {"waiting_jobs": body["waiting_jobs"], "teams": len(body["teams"]),
           "get_queue_computed_ms": round(statistics.median(computed), 1),
           "get_queue_cached_ms": round(statistics.median(cached), 1), "database": url.split(":")[0]}
    print(f"GET /v1/queue over {out['waiting_jobs']} waiting jobs of {out['teams']} teams: "
          f"{out['get_queue_computed_ms']} ms computing, {out['get_queue_cached_ms']} ms from the cache (median)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
