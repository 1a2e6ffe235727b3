"""When a waiting job may start, if the running jobs run to their time limit at the latest.

An estimate, not a promise: it walks the running jobs' latest ends in order and starts the
waiting jobs in queue order as their demand fits (quotas aside, and a started job is taken to
hold its capacity to the end of the horizon). Where nothing known frees enough, no estimate."""
from __future__ import annotations

from collections.abc import Sequence

from service.scheduling.model import Admitted, Id, Resources, Running, Waiting


def estimate_starts(capacity: Resources, running: Sequence[Running[Id]], admitted: Sequence[Admitted[Id]],
                    queue: Sequence[Waiting[Id]], waiting: Sequence[Waiting[Id]], now: float,
                    limit: int) -> dict[Id, float]:
    free = dict(capacity)
    demand_of = {w.job_id: w.demand for w in waiting}
    held = [j.demand for j in running] + [demand_of[a.job_id] for a in admitted if a.job_id in demand_of]
    for d in held:
        for r, n in d.items():
            free[r] = free.get(r, 0) - n
    ends = sorted((j for j in running if j.expected_end is not None), key=lambda j: (j.expected_end, str(j.job_id)))
    out: dict[Id, float] = {}
    i, t = 0, now
    for job in queue[:limit]:
        while not all(free.get(r, 0) >= n for r, n in job.demand.items()):
            if i == len(ends):
                return out
            ended = ends[i]
            i += 1
            for r, n in ended.demand.items():
                free[r] = free.get(r, 0) + n
            t = max(t, ended.expected_end or now)
        out[job.job_id] = t
        for r, n in job.demand.items():
            free[r] = free.get(r, 0) - n
    return out
