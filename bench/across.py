"""One pass over two backends for jobs that accept both (issue 52.1, service/scheduling/across.py)
against each backend's pass alone: CPU per pass of the pure functions, no database.

Two backends of 64 cores, 56 held by running jobs of 20 teams; N waiting jobs of 1 to 4 cores, a
share of them accepting both backends (in either order), the rest one or the other. Prints one line
per world and a JSON line last."""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.scheduling.across import Side, across
from service.scheduling.model import Policy, Running, Waiting
from service.scheduling.scheduler import schedule


def world(rnd: random.Random, waiting_jobs: int, both: float) -> tuple[list[Side[str]], dict[str, list[str]]]:
    teams = [f"t{i}" for i in range(20)]
    queues: dict[str, list[Waiting[str]]] = {"x": [], "y": []}
    accepts: dict[str, list[str]] = {}
    for i in range(waiting_jobs):
        w = Waiting(f"w{i}", rnd.choice(teams), 0, {"core": rnd.randint(1, 4)}, queued_at=float(i))
        r = rnd.random()
        if r < both:
            queues["x"].append(w)
            queues["y"].append(w)
            accepts[w.job_id] = ["x", "y"] if rnd.random() < 0.5 else ["y", "x"]
        else:
            queues["x" if r < both + (1 - both) / 2 else "y"].append(w)
    sides = [Side(name, {"core": 64}, {}, [Running(f"{name}r{i}", rnd.choice(teams), 0, {"core": 1}, started_at=0.0)
                                          for i in range(56)], queues[name]) for name in ("x", "y")]
    return sides, accepts


def best_of(repeat: int, run) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        run()
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each; the least CPU is kept")
    args = parser.parse_args()
    rnd, out = random.Random(1), []
    for jobs, both in ((1000, 0.5), (5000, 0.5), (5000, 1.0), (10000, 0.1)):
        sides, accepts = world(rnd, jobs, both)
        a = best_of(args.repeat, lambda: across(sides, accepts, 100.0, Policy()))
        alone = best_of(args.repeat, lambda: [schedule(s.capacity, s.shares, s.running, s.waiting, 100.0, Policy(),
                                                       explain=False) for s in sides])
        print(f"{jobs} waiting, {both:.0%} accepting both: across {a * 1000:.0f} ms CPU, "
              f"each backend alone (both passes) {alone * 1000:.0f} ms")
        out.append({"waiting": jobs, "both": both, "across_ms": round(a * 1000, 1), "alone_ms": round(alone * 1000, 1)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
