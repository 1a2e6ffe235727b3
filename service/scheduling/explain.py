"""Why a job waits, in the words a member reads: what it needs, what is free, where its team
stands against its quota, how many jobs are ahead."""
from __future__ import annotations

from service.scheduling.ledger import Ledger
from service.scheduling.model import Resources, Waiting


def words(resource: str) -> str:
    """'gpu:NVIDIA_TESLA_A100' -> 'NVIDIA_TESLA_A100', 'vcpu' -> 'vCPUs', 'core' -> 'cores'."""
    kind, _, detail = resource.partition(":")
    return detail or {"vcpu": "vCPUs", "core": "cores", "gpu": "GPUs"}.get(kind, kind)


def amounts(demand: Resources) -> str:
    return ", ".join(f"{n} {words(r)}" for r, n in sorted(demand.items()) if n)


def waiting_why(ledger: Ledger, job: Waiting) -> str:
    parts = []
    limit = ledger.over_borrowing_limit(job.team, job.demand)
    if limit:
        use = ledger.use.get(job.team, {})
        parts.append("; ".join(f"team {job.team} may use at most {n} {words(r)} (nominal quota + borrowing limit) "
                               f"and uses {use.get(r, 0)}" for r, n in sorted(limit.items())))
    elif not ledger.could_ever_fit(job.team, job.demand):
        parts.append(f"needs {amounts(job.demand)}: more than this backend has for team {job.team} "
                     f"({amounts(ledger.capacity)} in all, some kept for other teams' nominal quotas); "
                     "it starts only once the capacity or the quotas grow")
    else:
        short = ledger.short(job.team, job.demand)
        if short:
            parts.append(", ".join(f"needs {job.demand.get(r, 0)} {words(r)}, {max(0, ledger.available(r))} free"
                                   for r in sorted(short)))
        parts.append(team_standing(ledger, job.team, short or job.demand))
    return "; ".join(p for p in parts if p)


def team_standing(ledger: Ledger, team: str, resources: Resources) -> str:
    nominal, use = ledger.share(team).nominal, ledger.use.get(team, {})
    over = [r for r in resources if use.get(r, 0) > nominal.get(r, 0)]
    at = [r for r in resources if nominal.get(r, 0) and use.get(r, 0) == nominal.get(r, 0)]
    if over:
        return f"team {team} already borrows beyond its nominal quota"
    if at:
        return f"team {team} is at its nominal quota"
    if any(nominal.get(r, 0) for r in resources):
        return f"team {team} is inside its nominal quota (capacity held by borrowers is reclaimed)"
    return ""
