"""Shared capacity (issue 38): the scheduler's cost, and teams contending for one backend.

(a) One admission pass (service/scheduling) over 10,000 waiting jobs of 50 teams, with 200
    running jobs, nominal quotas, weights, priorities and a preempting class: the pass's
    wall time (median of --repeat), admissions and preemptions. Goal <= 100 ms.
(b) Three teams on a real service with the local backend (bench/contention.py): a capacity of
    4 cores; team A floods 30 one-core trainer jobs of about 20 s, team B submits 5 a little
    later, team C one job of a preempting class later still. Each team's wait, B's and C's time
    to a first start, the preemptions and the step each preempted job resumed at, and the most
    cores ever in use (replica processes counted in /proc, not the service's own figure).

Run: .venv/bin/python bench/fairness.py [--repeat 20] [--only a|b]
The last line is one JSON object with the figures."""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.scheduling.model import Policy, Running, Share, Waiting
from service.scheduling.scheduler import schedule


def world(teams: int, waiting: int, running: int, seed: int = 7):
    rng = random.Random(seed)
    names = [f"team{i:02d}" for i in range(teams)]
    capacity = {"vcpu": 4096, "gpu:NVIDIA_TESLA_A100": 256, "gpu:NVIDIA_TESLA_T4": 512}
    shares = {t: Share(nominal={"vcpu": 48, "gpu:NVIDIA_TESLA_A100": 3, "gpu:NVIDIA_TESLA_T4": 6},
                       weight=rng.choice([1.0, 1.0, 2.0])) for t in names[: teams // 2]}

    def demand():
        gpu = rng.choice(["gpu:NVIDIA_TESLA_A100", "gpu:NVIDIA_TESLA_T4"])
        replicas = rng.choice([1, 1, 2, 4])
        return {"vcpu": 8 * replicas, gpu: rng.choice([1, 2]) * replicas}

    run = [Running(f"r{i}", rng.choice(names), rng.choice([0, 0, 10]), demand(), float(i), expected_end=10_000.0 + i)
           for i in range(running)]
    wait = [Waiting(f"w{i}", rng.choice(names), rng.choice([0, 0, 0, 10, 100]), demand(), 1000.0 + i,
                    may_preempt=rng.random() < 0.01) for i in range(waiting)]
    return capacity, shares, run, wait


def one_pass(repeat: int) -> dict:
    capacity, shares, running, waiting = world(50, 10_000, 200)
    times, d = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        d = schedule(capacity, shares, running, waiting, now=5000.0, policy=Policy(starve_after_s=3600))
        times.append((time.perf_counter() - t0) * 1000)
    assert d is not None
    # The controller's own pass asks for no words and estimates (explain=False): same decision.
    bare = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        b = schedule(capacity, shares, running, waiting, now=5000.0, policy=Policy(starve_after_s=3600),
                     explain=False)
        bare.append((time.perf_counter() - t0) * 1000)
        assert b.admit == d.admit and b.preempt == d.preempt
    return {"pass_ms_10000_jobs_50_teams": round(statistics.median(times), 1),
            "pass_ms_max": round(max(times), 1), "controller_pass_ms": round(statistics.median(bare), 1),
            "admitted": len(d.admit), "preempted": len(d.preempt), "queued": len(d.queue)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", choices=["a", "b"])
    ap.add_argument("--flood", type=int, default=30, help="(b) team A's jobs")
    args = ap.parse_args()
    out: dict = {}
    if args.only in (None, "a"):
        a = one_pass(args.repeat)
        print(f"(a) one pass over 10,000 waiting jobs of 50 teams, 200 running: median "
              f"{a['pass_ms_10000_jobs_50_teams']} ms, max {a['pass_ms_max']} ms; {a['admitted']} admitted, "
              f"{a['preempted']} preempted, {a['queued']} still queued; the controller's pass (no words or "
              f"estimates, the same decision): median {a['controller_pass_ms']} ms")
        out.update(a)
    if args.only in (None, "b"):
        from bench.contention import contend
        out.update(contend(flood=args.flood))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
