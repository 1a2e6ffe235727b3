"""The usage ledger's cost (issue 52.3): N finished jobs of 50 teams over the last 70 days (10
half-lives at the default 7 days) on three backends, plus R running: the first recompute (it
folds back the whole horizon), a steady recompute (from the watermark: the last two hours), the
buckets and totals it keeps, and the admission pass's read of every team's decayed use
(decayed_by_team, one query on every pass).

Run: .venv/bin/python bench/usage_ledger.py [--jobs 100000] [--running 2000] [--url postgresql+psycopg://...]
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
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient
from sqlalchemy import func, insert, select

from service.app import create_app
from service.auth.service import create_token, get_or_create_team
from service.core.clock import utcnow
from service.demo import demo_template
from service.persistence import migrate
from service.persistence.models import Job, Team, UsageBucket
from service.persistence.session import make_engine, make_session_factory
from service.slices import Settings
from service.usage.billing import DEFAULT_BILLING_WEIGHTS
from service.usage.recompute import recompute
from service.usage.settings import UsageSettings
from service.usage.store import decayed_by_team

DEMANDS = [{"core": 1}, {"vcpu": 8}, {"vcpu": 16, "gpu:NVIDIA_TESLA_A100": 2}, {"vcpu": 4, "gpu:NVIDIA_TESLA_T4": 1}]


def seed(url: str, tmp: Path, jobs: int, running: int) -> None:
    factory = make_session_factory(make_engine(url))
    with factory() as s:
        secret = create_token(s, get_or_create_team(s, "team00"), "bench", "admin", "bench")[1]
        teams = [get_or_create_team(s, f"team{i:02d}") for i in range(50)]
        s.commit()
    settings = Settings(database_url=url, backends=["local"], local_work_dir=tmp / "runs", local_max_running_jobs=0,
                        run_reconciler=False, seed_demo_template=False)
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {secret}"}) as c:
        assert c.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True)).status_code == 201
        first = c.post("/v1/jobs", json={"template": "mwms-demo"}).json()["id"]
    now, rng = utcnow(), random.Random(7)
    with factory() as s:
        row = s.execute(select(Job).where(Job.id == uuid.UUID(first))).scalar_one()
        base = {col.key: getattr(row, col.key) for col in Job.__table__.columns}
        rows = []
        for i in range(jobs + running):
            start = now - timedelta(hours=rng.uniform(0.1, 70 * 24))
            end = None if i >= jobs else min(now, start + timedelta(hours=rng.expovariate(1 / 3)))
            rows.append(base | {"id": uuid.uuid4(), "team_id": rng.choice(teams).id, "display_name": f"j{i}",
                                "backend": rng.choice(["local", "vertex", "slurm"]), "demand": rng.choice(DEMANDS),
                                "state": "RUNNING" if end is None else "SUCCEEDED", "backend_ref": f"ref-{i}",
                                "started_at": start, "ended_at": end})
        for k in range(0, len(rows), 1000):
            s.execute(insert(Job), rows[k:k + 1000])
        s.commit()


def timed(factory, now, settings) -> tuple[float, float, int]:
    """Recomputes until caught up: (total ms, the longest pass's ms, passes)."""
    passes, more = [], True
    while more:
        t0 = time.perf_counter()
        with factory() as s:
            more = recompute(s, now, settings, fence=None)
            s.commit()
        passes.append((time.perf_counter() - t0) * 1000)
    return sum(passes), max(passes), len(passes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--running", type=int, default=2_000)
    ap.add_argument("--url")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="usage-bench-"))
    tmp.chmod(0o711)
    url = args.url or f"sqlite:///{tmp / 'bench.db'}"
    migrate.upgrade(url)
    seed(url, tmp, args.jobs, args.running)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    settings = UsageSettings(dict(DEFAULT_BILLING_WEIGHTS), 7 * 86_400.0, 300.0)
    now = utcnow()
    first, longest, passes = timed(factory, now, settings)
    steady = [timed(factory, now + timedelta(minutes=5 * (i + 1)), settings)[0] for i in range(args.repeat)]
    with factory() as s:
        names = dict(s.execute(select(Team.id, Team.name)).all())
        buckets = s.scalar(select(func.count()).select_from(UsageBucket))
        reads = []
        for _ in range(args.repeat * 4):
            t0 = time.perf_counter()
            decayed_by_team(s, names, now)
            reads.append((time.perf_counter() - t0) * 1000)
    engine.dispose()
    out = {"jobs": args.jobs, "running": args.running, "teams": 50, "backends": 3, "buckets": buckets,
           "first_recompute_ms": round(first, 1), "first_passes": passes, "longest_pass_ms": round(longest, 1),
           "steady_recompute_ms": round(statistics.median(steady), 1),
           "pass_read_ms": round(statistics.median(reads), 2), "database": url.split(":")[0]}
    print(f"{args.jobs} ended + {args.running} running jobs, 50 teams, 3 backends, 70 days: "
          f"{buckets} hourly buckets; first recompute {out['first_recompute_ms']} ms in {passes} passes "
          f"(longest {out['longest_pass_ms']} ms), steady "
          f"{out['steady_recompute_ms']} ms (median of {args.repeat}); an admission pass's read of every "
          f"team's decayed use {out['pass_read_ms']} ms")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
