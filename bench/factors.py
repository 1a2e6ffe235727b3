"""What a waiting job's priority in parts (issue 52.4, service/scheduling/factors.py) adds to a
computation of the queue: factors() over every waiting job in the shown order, against the
computation it rides on (forecast.explained: the pass and its two plays), on the pure scheduler
with no database. N waiting jobs of T teams (1 or 2 cores, priorities 0/50/100, ages spread over
an hour, a third of the teams with a nominal quota), 64 cores and 64 launch slots half held.

Run: .venv/bin/python bench/factors.py [--jobs 10000] [--teams 50] [--repeat 5]
The last line is one JSON object with the figures (medians, milliseconds)."""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.scheduling.factors import factors
from service.scheduling.forecast import explained
from service.scheduling.model import SLOT, Policy, Running, Share, Waiting


def world(jobs: int, teams: int, seed: int = 7):
    rnd = random.Random(seed)
    names = [f"team{i:02d}" for i in range(teams)]
    shares = {t: Share(nominal={"core": 2}) for t in names[::3]}
    now = 10_000.0
    running = [Running(f"r{i}", rnd.choice(names), 0, {"core": 1, SLOT: 1}, now - rnd.uniform(0, 600),
                       expected_end=now + rnd.uniform(60, 3600), likely_end=now + rnd.uniform(30, 600))
               for i in range(32)]
    waiting = [Waiting(f"w{i}", rnd.choice(names), rnd.choice((0, 50, 100)), {"core": rnd.choice((1, 2)), SLOT: 1},
                       now - rnd.uniform(0, 3600), duration=rnd.uniform(30, 600), limit=3600.0)
               for i in range(jobs)]
    return {"core": 64, SLOT: 64}, shares, running, waiting, now


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--teams", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    capacity, shares, running, waiting, now = world(args.jobs, args.teams)
    policy = Policy()
    computing, parts = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        d = explained(capacity, shares, running, waiting, now, policy, served={})
        t1 = time.perf_counter()
        order = [a.job_id for a in d.admit] + [q.job_id for q in d.queue]
        factors(capacity, shares, running, waiting, order, now, policy, served={})
        t2 = time.perf_counter()
        computing.append((t1 - t0) * 1000)
        parts.append((t2 - t1) * 1000)
    out = {"jobs": args.jobs, "teams": args.teams, "explained_ms": round(statistics.median(computing), 1),
           "factors_ms": round(statistics.median(parts), 1),
           "factors_share": round(statistics.median(parts) / statistics.median(computing), 3)}
    print(f"{args.jobs} waiting jobs of {args.teams} teams: the computation (pass + plays) "
          f"{out['explained_ms']} ms, the factors {out['factors_ms']} ms ({out['factors_share']:.1%} more)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
