"""The queue's forecast against the controller, offline and in seconds (issue 49.1, 49.2): the pure
scheduler run pass after pass as the controller runs it (passes of uneven length, a launch inside
its pass, an end seen at the next pass), against the forecast (scheduling/forecast.py `explained`)
computed once after the first pass, in bench/forecast.py's world (4 cores, 4 launch slots, teams
t1 with a nominal 2 cores, t2, t3; jobs of 2, 4, 6 s, the 6-s ones --long-cores cores; 40 at once).
What bench/forecast.py measures on a real service in 70 s, over many seeds in a few: used to
choose the backfill reservation and the play's pass per start before measuring them there.

Run: .venv/bin/python bench/forecast_replay.py [--root DIR] [--seeds 20] [--long-cores 2] [--pass-took 0.04:0.3]
[--launch-took 0.08:0.23] [--told both|took|next|none]
(--root: the code to load, e.g. a copy of an older commit). It prints the means and minima of
tau, the share within likely + 20% of the wait, the share by the latest, the mean wait, the makespan."""
from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
from pathlib import Path


def tau_b(x: list[float], y: list[float]) -> float:
    c = d = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            a, b = (x[i] > x[j]) - (x[i] < x[j]), (y[i] > y[j]) - (y[i] < y[j])
            if a and b:
                c += a == b
                d += a != b
            elif a:
                ty += 1
            elif b:
                tx += 1
    return (c - d) / math.sqrt((c + d + tx) * (c + d + ty))


def one(seed: int, long_cores: int, m, jobs_n: int = 40, interval: float = 0.5,
        took_s: tuple[float, float] = (0.04, 0.3), told: str = "both",
        launch_s: tuple[float, float] | None = None) -> tuple:
    rng = random.Random(seed)
    kinds = {"short": (2, 1), "mid": (4, 1), "long": (6, long_cores)}
    cap = {"core": 4, m.SLOT: 4}
    shares = {"t1": m.Share(nominal={"core": 2})}
    teams, names = ("t1", "t2", "t3"), list(kinds)
    jobs = {}
    for i in range(jobs_n):
        d, c = kinds[names[(i // 3) % 3]]
        jobs[f"j{i:02d}"] = {"team": teams[i % 3], "d": d, "c": c, "q": i * 0.01 + rng.uniform(0, 0.02)}
    policy = m.Policy(pass_s=interval)
    served = {"t1": -30.0, "t2": -20.0, "t3": -10.0}

    def running_now(running):
        return [m.Running(j, job["team"], 0, {"core": job["c"], m.SLOT: 1}, s, expected_end=s + 2 * job["d"],
                          likely_end=s + job["d"]) for j, (s, job) in running.items()]

    def waiting_now(waiting):
        return [m.Waiting(j, job["team"], 0, {"core": job["c"], m.SLOT: 1}, job["q"], duration=job["d"],
                          limit=2 * job["d"]) for j, job in waiting.items()]

    waiting, running, started, snap = dict(jobs), {}, {}, None
    first: tuple = ([], [])                            # the running and waiting jobs after the first pass
    first_served: dict = {}
    t, k = rng.uniform(0.05, 0.5), 0
    while waiting or running:
        took = rng.uniform(*took_s)                    # the pass's own length, under load
        running = {j: (s, job) for j, (s, job) in running.items() if s + job["d"] > t + 0.01}
        if k == 1:                                     # the queue as read between the first two passes
            now = t - 0.2
            # What the controller tells the forecast (lifecycle/loop.py, capacity/passes.py): its
            # passes' own lengths (here the range they are drawn from) and when its next one starts.
            told_policy = policy
            if told in ("both", "took"):
                told_policy = m.replace(told_policy, pass_took=took_s)
                if launch_s is not None:
                    told_policy = m.replace(told_policy, launch_took=sum(launch_s) / 2)
            if told in ("both", "next"):
                told_policy = m.replace(told_policy, next_pass_at=t)
            snap = (now, {q.job_id: q for q in m.explained(cap, shares, *first, now, told_policy, served=first_served).queue})
        at = t + took * 0.6                            # the plan is made after the polls
        d = m.schedule(cap, shares, running_now(running), waiting_now(waiting), at, policy, explain=False, served=served)
        if d.admit and launch_s is not None:           # a pass that launches is longer, its launches at its end
            took = rng.uniform(*launch_s)
            at = t + took - 0.004 * len(d.admit)
        for i, a in enumerate(d.admit):
            job = waiting.pop(a.job_id)
            running[a.job_id] = (at + 0.004 * i, job)
            started.setdefault(a.job_id, at + 0.004 * i)
            served[job["team"]] = at
        for p in d.preempt:                            # the sim stops a preempted job at once
            waiting[p.job_id] = running.pop(p.job_id)[1]
        if k == 0:
            first, first_served = (running_now(running), waiting_now(waiting)), dict(served)
        t, k = t + took + interval, k + 1
    now, q = snap
    ids = sorted(q, key=lambda j: q[j].position)
    within = [j for j in ids if q[j].likely_start is not None
              and started[j] <= q[j].likely_start + 0.2 * (q[j].likely_start - now)]
    latest = [j for j in ids if q[j].estimated_start is not None and started[j] <= q[j].estimated_start]
    return (tau_b([q[j].position for j in ids], [started[j] for j in ids]), len(within) / len(ids),
            len(latest) / len(ids), sum(started[j] - now for j in ids) / len(ids),
            max(s + jobs[j]["d"] for j, s in started.items()) - now)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--long-cores", type=int, default=2)
    ap.add_argument("--told", default="both", choices=("both", "took", "next", "none"),
                    help="what the controller tells the forecast: its passes' lengths (took), when its next pass "
                    "starts (next), both, or nothing (none: the play draws passes 1-2 intervals apart; older code)")
    ap.add_argument("--launch-took", default="", help="LOW:HIGH seconds a pass that launches takes, its launches at its "
                    "end (measured: 0.08:0.23 at load 5, the others 0.01:0.03); default: as any other pass")
    ap.add_argument("--pass-took", default="0.04:0.3", help="each controller pass's own length, LOW:HIGH seconds "
                    "(drawn per pass; the next starts the interval after it): 0:0.05 a quiet host, 0.3:1.0 a loaded one")
    args = ap.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    from service.scheduling import forecast, model, scheduler

    class M:
        SLOT, Share, Policy, Running, Waiting = model.SLOT, model.Share, model.Policy, model.Running, model.Waiting
        replace = staticmethod(dataclasses.replace)
        schedule, explained = staticmethod(scheduler.schedule), staticmethod(forecast.explained)

    took = tuple(float(x) for x in args.pass_took.split(":"))
    launch = tuple(float(x) for x in args.launch_took.split(":")) if args.launch_took else None
    rows = [one(s, args.long_cores, M, took_s=(took[0], took[1]), told=args.told, launch_s=launch)  # type: ignore[arg-type]
            for s in range(args.seeds)]
    mean = [sum(r[i] for r in rows) / len(rows) for i in range(5)]
    low = [min(r[i] for r in rows) for i in range(3)]
    print(f"{args.root}: tau mean {mean[0]:.3f} (min {low[0]:.3f}, >= 0.9 in {sum(r[0] >= 0.9 for r in rows)} of "
          f"{len(rows)}); within likely + 20% {mean[1]:.1%} "
          f"(min {low[1]:.1%}); by the latest {mean[2]:.1%} (min {low[2]:.1%}); mean wait {mean[3]:.2f} s; "
          f"makespan {mean[4]:.2f} s")


if __name__ == "__main__":
    main()
