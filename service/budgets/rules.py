"""Would one more job cross a team limit? The same rule for a submit and a launch."""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from service.budgets.usage import Use
from service.cost.estimate import MICRO


@dataclass(frozen=True)
class Demand:
    """What one job adds: one job, its accelerators, its estimate to timeout."""

    accelerators: dict[str, int]
    spend_micros: int
    complete: bool


@dataclass(frozen=True)
class Violation:
    limit: str
    use: Decimal
    max: Decimal
    needs: Decimal
    message: str


def _money(m: int) -> Decimal:
    return (Decimal(m) * MICRO).quantize(MICRO)


def check(limits, use: Use, job: Demand, team: str, currency: str) -> Violation | None:
    """The first limit that `use` plus `job` would cross, or None."""
    if limits.max_concurrent_jobs is not None and use.jobs + 1 > limits.max_concurrent_jobs:
        return Violation("max_concurrent_jobs", Decimal(use.jobs), Decimal(limits.max_concurrent_jobs), Decimal(1),
                         f"team {team} has {use.jobs} active jobs of its limit of {limits.max_concurrent_jobs}")
    for kind, n in sorted(job.accelerators.items()):
        cap = (limits.max_accelerators or {}).get(kind)
        have = use.accelerators.get(kind, 0)
        if cap is not None and have + n > cap:
            return Violation(f"max_accelerators.{kind}", Decimal(have), Decimal(cap), Decimal(n),
                             f"team {team} uses {have} {kind} of its limit of {cap}; this job needs {n} more")
    cap = limits.max_monthly_spend_micros
    if cap is not None and use.spend_micros + job.spend_micros > cap:
        return Violation("max_monthly_spend", _money(use.spend_micros), _money(cap), _money(job.spend_micros),
                         f"team {team} has spent or holds an estimated {_money(use.spend_micros)} {currency} of its "
                         f"monthly limit of {_money(cap)} {currency}; this job may cost up to "
                         f"{_money(job.spend_micros)} {currency} (its estimate to timeout)")
    return None


def never_fits(limits, job: Demand, team: str, currency: str) -> Violation | None:
    """A limit this job crosses on its own: waiting would never help."""
    return check(limits, Use(), job, team, currency)
