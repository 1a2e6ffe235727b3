"""`trainjobs queue simulate` at the scale issue 51.5 names: a week of a busy backend (5,000 jobs
by default) replayed twice, as it is and under a proposal, in one process. The goal: under a
minute of the wall clock on this 2-core host.

Set-up: a fresh SQLite file (`trainjobs prepare`: the demo template); teams vision (60% of the
jobs), speech (25%) and research (15%); jobs of 1, 2 or 4 cores (half, a third, a sixth), run
times log-normal around 20 minutes (6 minutes to 4 hours), submitted at random over the last 7
days; capacity {"sim": {"core": 28}} (about 80% busy; --cores 24: 90%). What happened is the pure replay under that
capacity (so the history is consistent); the proposal cuts the capacity by a sixth (28 -> 23
cores) and gives vision a nominal quota of 5/12 of the old capacity (11 cores).

Figures: the seed time, the command's wall time (a process of its own, from start to report)
and CPU time (its whole process: imports, the database read, the replays), the CPU seconds of its
two replays (the report's cpu_seconds), jobs replayed, the report's waits.

Run: .venv/bin/python bench/whatif.py [--jobs 5000] [--days 7] [--cores 48]
The last line is one JSON object (jobs, wall_s, command_cpu_s, replay_cpu_s, seed_s)."""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def workload(n: int, days: int, seed: int = 51):
    from service.capacity.whatif_replay import PastJob
    rng = random.Random(seed)
    teams = ["vision"] * 12 + ["speech"] * 5 + ["research"] * 3
    return [PastJob(i, rng.choice(teams), 0, False, {"core": rng.choice([1, 1, 1, 2, 2, 4])},
                    rng.uniform(0, days * 86_400 - 3600), min(14_400.0, max(360.0, rng.lognormvariate(7.1, 0.6))))
            for i in range(n)]


def seed(url: str, jobs, cores: int, days: int) -> None:
    """The jobs as rows that happened: started when the pure replay under `cores` starts them."""
    from sqlalchemy import insert, select

    from service.auth.service import get_or_create_team
    from service.capacity.whatif_replay import World, replay
    from service.core.clock import utcnow
    from service.persistence.models import Job, Template
    from service.persistence.session import make_engine, make_session_factory
    from service.scheduling.model import Policy

    starts = replay(jobs, World({"core": cores}, {}), Policy(pass_s=0.5), max_preemptions_per_job=3)
    now = utcnow()
    t0 = now - timedelta(days=days)
    engine = make_engine(url)
    with make_session_factory(engine)() as s:
        template = s.scalars(select(Template)).first()
        teams = {name: get_or_create_team(s, name).id for name in ("vision", "speech", "research")}
        s.flush()
        rows = []
        for j in jobs:
            submitted = t0 + timedelta(seconds=j.submitted)
            start = None if j.job_id not in starts else t0 + timedelta(seconds=starts[j.job_id])
            end = None if start is None else start + timedelta(seconds=j.duration)
            done = end is not None and end <= now
            rows.append({"id": uuid.uuid4(), "team_id": teams[j.team], "display_name": f"job-{j.job_id}",
                         "template_id": template.id, "template_name": template.name, "template_version": 1,
                         "backend": "sim", "state": "SUCCEEDED" if done else "RUNNING", "parameters": {},
                         "overrides": {}, "labels": {}, "compiled": {}, "demand": dict(j.demand),
                         "created_at": submitted, "updated_at": submitted, "started_at": start,
                         "ended_at": end if done else None})
        for k in range(0, len(rows), 1000):
            s.execute(insert(Job), rows[k:k + 1000])
        s.commit()
    engine.dispose()


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--cores", type=int, default=28)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/whatif.db"
        env = {**os.environ, "TRAINJOBS_DATABASE_URL": url, "TRAINJOBS_BACKENDS": '["sim"]',
               "TRAINJOBS_DEFAULT_BACKEND": "sim", "TRAINJOBS_CAPACITY": json.dumps({"sim": {"core": args.cores}}),
               "TRAINJOBS_BOOTSTRAP_TOKEN_FILE": f"{tmp}/token", "TRAINJOBS_LOG_LEVEL": "WARNING"}
        subprocess.run([sys.executable, "-m", "service.cli", "prepare"], env=env, check=True, cwd=ROOT,
                       capture_output=True)
        t = time.perf_counter()
        seed(url, workload(args.jobs, args.days), args.cores, args.days)
        seeded = time.perf_counter() - t
        proposal = Path(tmp) / "proposal.json"
        proposal.write_text(json.dumps({"capacity": {"resources": {"core": args.cores * 5 // 6}},
                                        "shares": {"vision": {"nominal": {"core": args.cores * 5 // 12}}}}))
        t, cpu = time.perf_counter(), _children_cpu()
        run = subprocess.run([sys.executable, "-m", "service.cli", "queue", "simulate", "--days", str(args.days),
                              "--proposal", str(proposal)], env=env, cwd=ROOT, capture_output=True, text=True)
        wall, command_cpu = time.perf_counter() - t, _children_cpu() - cpu
        print(run.stdout, run.stderr, sep="\n")
        if run.returncode:
            return run.returncode
        again = subprocess.run([sys.executable, "-m", "service.cli", "queue", "simulate", "--days", str(args.days),
                                "--proposal", str(proposal), "--json"], env=env, cwd=ROOT, capture_output=True,
                               text=True, check=True)
        report = json.loads(again.stdout)
    print(json.dumps({"jobs": report["jobs"], "wall_s": round(wall, 2), "command_cpu_s": round(command_cpu, 2),
                      "replay_cpu_s": round(report["cpu_seconds"], 2), "seed_s": round(seeded, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
