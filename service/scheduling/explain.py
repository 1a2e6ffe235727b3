"""Why a job waits, in the words a member reads: what it needs, what is free, where its team
stands against its quota, how many jobs are ahead."""
from __future__ import annotations

from service.scheduling.ledger import Ledger
from service.scheduling.model import SLOT, Resources, Waiting, quota_part

_NAMES = {"vcpu": ("vCPU", "vCPUs"), "core": ("core", "cores"), "gpu": ("GPU", "GPUs"),
          SLOT: ("launch slot", "launch slots")}


def words(resource: str, n: int = 2) -> str:
    """'gpu:NVIDIA_TESLA_A100' -> 'NVIDIA_TESLA_A100', 'vcpu' -> 'vCPUs' ('vCPU' for n = 1),
    'core' -> 'cores', the launch slot -> 'launch slots'."""
    kind, _, detail = resource.partition(":")
    if detail:
        return detail
    one, many = _NAMES.get(kind, (kind, kind))
    return one if n == 1 else many


def amount(n: int, resource: str) -> str:
    """'1 core', '2 cores', '0 cores', '1 launch slot'."""
    return f"{n} {words(resource, n)}"


def amounts(demand: Resources) -> str:
    return ", ".join(amount(n, r) for r, n in sorted(demand.items()) if n)


def waiting_why(ledger: Ledger, job: Waiting) -> str:
    parts = []
    limit = ledger.over_borrowing_limit(job.team, job.demand)
    if limit:
        use = ledger.use_of(job.team)
        parts.append("; ".join(f"team {job.team} may use at most {amount(n, r)} (nominal quota + borrowing limit) "
                               f"and uses {use.get(r, 0)}" for r, n in sorted(limit.items())))
    elif not ledger.could_ever_fit(job.team, job.demand):
        if ledger.capacity.get(SLOT, 1) <= 0:
            return "this backend launches no job: its limit on running jobs is 0 (an operator's setting)"
        parts.append(f"needs {amounts(quota_part(job.demand))}: more than this backend has for team {job.team} "
                     f"({amounts(quota_part(ledger.capacity))} in all, some kept for other teams' nominal quotas); "
                     "it starts only once the capacity or the quotas grow")
    else:
        short = ledger.short(job.team, job.demand)
        if short:
            parts.append(", ".join(_short_words(ledger, job, r) for r in sorted(short)))
        parts.append(team_standing(ledger, job.team, short or job.demand))
    return "; ".join(p for p in parts if p)


def _short_words(ledger: Ledger, job: Waiting, r: str) -> str:
    free = max(0, ledger.available(r))
    if r == SLOT:
        limit = ledger.capacity.get(SLOT, 0)
        return f"every launch slot is taken ({free} of {limit} free: the backend runs at most {limit} " \
               f"job{'s' if limit != 1 else ''} at once)"
    return f"needs {amount(job.demand.get(r, 0), r)}, {free} free"


def team_standing(ledger: Ledger, team: str, resources: Resources) -> str:
    resources = quota_part(resources)
    nominal, use = ledger.share(team).nominal, ledger.use_of(team)
    over = [r for r in resources if use.get(r, 0) > nominal.get(r, 0)]
    at = [r for r in resources if nominal.get(r, 0) and use.get(r, 0) == nominal.get(r, 0)]
    if over:
        return f"team {team} already borrows beyond its nominal quota"
    if at:
        return f"team {team} is at its nominal quota"
    if any(nominal.get(r, 0) for r in resources):
        return f"team {team} is inside its nominal quota (capacity held by borrowers is reclaimed)"
    return ""
