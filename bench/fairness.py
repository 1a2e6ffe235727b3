"""Shared capacity (issue 38): the scheduler's cost, and teams contending for one backend.

(a) One admission pass (service/scheduling) over 10,000 waiting jobs of 50 teams, with 200
    running jobs, nominal quotas, weights, priorities and a preempting class: the pass's
    wall time (median of --repeat), admissions and preemptions. Goal <= 100 ms.
(b) Three teams on a real service with the local backend (bench/contention.py): a capacity of
    4 cores; team A floods 30 one-core trainer jobs of about 20 s, team B submits 5 a little
    later, team C one job of a preempting class later still. Each team's wait, B's and C's time
    to a first start, the preemptions and the step each preempted job resumed at, and the most
    cores ever in use (replica processes counted in /proc, not the service's own figure).
(c) The defaults (issue 47, bench/fair_defaults.py): no capacity, launch slots at their default
    (2) and at 1; team A queues 12 jobs of 4 s, then team B 1, B named after A and before it:
    B's wait and how many of A's jobs started before it.
(d) A team reclaiming a launch slot (bench/fair_defaults.py): capacity 4 cores, 2 slots, A and B
    a nominal core each; A's two 30 s jobs take both slots, then B submits 1: B's wait and the
    preemptions of A's jobs (grace 2 s).
(c) and (d) start `serve` from --root's code (default: this tree), e.g. a worktree of older code.

Run: .venv/bin/python bench/fairness.py [--repeat 20] [--only a|b|c|d] [--root DIR]
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
    ap.add_argument("--only", choices=["a", "b", "c", "d"])
    ap.add_argument("--flood", type=int, default=30, help="(b) team A's jobs")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                    help="(c), (d): the tree whose service code `serve` runs (default: this one)")
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
    if args.only in (None, "c"):
        out["defaults"] = _defaults(args.root.resolve())
    if args.only in (None, "d"):
        out["reclaim"] = _reclaim(args.root.resolve())
    print(json.dumps(out))


def _defaults(root: Path) -> list[dict]:
    from bench.fair_defaults import defaults
    runs = []
    for slots in (None, 1):
        for early, late in (("teama", "teamb"), ("teamb", "teama")):
            r = defaults(root, slots, late=late, early=early)
            print(f"(c) no capacity, {r['slots']} launch slots ({r['slots_setting']}): {early} queued "
                  f"{r['early_jobs']} jobs of {r['job_s']:g} s, then {late} 1: {late}'s job waited "
                  f"{r['late_wait_s']} s, {r['early_started_before']} of {early}'s started before it "
                  f"(load {r['load_avg_1m']}; code {r['service_code']})", flush=True)
            runs.append(r)
    return runs


def _reclaim(root: Path) -> dict:
    from bench.fair_defaults import reclaim
    r = reclaim(root)
    kinds = ", ".join(f"{p['cause']}/{p['kind']}" for p in r["preemptions"]) or "none"
    print(f"(d) capacity 4 cores, 2 launch slots, A and B a nominal core: A's {r['long_job_s']:g} s jobs take both "
          f"slots, B submits 1: B's job waited {r['late_wait_s']} s (grace {r['grace_s']} s); {r['preempted']} of "
          f"A's jobs preempted ({kinds}) (load {r['load_avg_1m']}; code {r['service_code']})", flush=True)
    for p in r["preemptions"]:
        print(f"(d) preempted: {p['why']}")
    return r


if __name__ == "__main__":
    main()
