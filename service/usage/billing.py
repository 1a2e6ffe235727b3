"""The ledger's arithmetic, pure: a job's billing units per hour from its demand, the hours a run
spans, and decay. One currency for every backend (Slurm's TRESBillingWeights): an operator says
what a resource-hour is worth; a resource with no weight costs nothing."""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)
# Buckets older than this many half-lives weigh under 1/1000 of their units: they are dropped,
# and a first recompute folds no further back.
HORIZON_HALF_LIVES = 10
ANY_ACCELERATOR = "gpu:*"
# The defaults of TRAINJOBS_USAGE_BILLING_WEIGHTS: an accelerator-hour is worth 100 CPU-hours (the
# issue's example: 1 A100-hour = 10 units, 1 vCPU-hour = 0.1), for every name the backends' demand
# uses (local: core, gpu; Vertex and Slurm: vcpu, gpu:<TYPE>).
DEFAULT_BILLING_WEIGHTS = {ANY_ACCELERATOR: 10.0, "gpu": 10.0, "vcpu": 0.1, "core": 0.1}
MAX_BILLING_WEIGHTS = 256


def weight_of(resource: str, weights: Mapping[str, float]) -> float:
    """The resource's own weight, else "gpu:*" for an accelerator type (gpu:<TYPE>), else 0."""
    if resource in weights:
        return float(weights[resource])
    if resource.startswith("gpu:"):
        return float(weights.get(ANY_ACCELERATOR, 0.0))
    return 0.0


def units_per_hour(demand: Mapping | None, weights: Mapping[str, float]) -> float:
    """What one hour of a job holding `demand` ({resource: count}) costs in billing units."""
    if not demand:
        return 0.0
    units = sum(float(n) * weight_of(str(r), weights) for r, n in demand.items()
                if isinstance(n, int | float) and not isinstance(n, bool) and 0 < n < math.inf)
    return units if units < math.inf else 0.0   # no count is that large: not a figure to bill


def floor_hour(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def split_hours(start: datetime, end: datetime) -> Iterator[tuple[datetime, float]]:
    """The clock hours [start, end) touches, each with the hours of it inside (0 < h <= 1)."""
    hour = floor_hour(start)
    while hour < end:
        part = (min(end, hour + HOUR) - max(start, hour)).total_seconds() / 3600
        if part > 0:
            yield hour, part
        hour += HOUR


def decayed(units: float, age_seconds: float, half_life_seconds: float) -> float:
    """`units` used `age_seconds` ago, halved every half-life (2^(-age/half-life))."""
    return units * 2.0 ** (-max(0.0, age_seconds) / half_life_seconds)


def bucket_age(hour: datetime, now: datetime) -> float:
    """A bucket's use counts from the end of its hour (the hour still running: from now)."""
    return (now - min(hour + HOUR, now)).total_seconds()


def horizon(now: datetime, half_life_seconds: float) -> datetime:
    return floor_hour(now - timedelta(seconds=HORIZON_HALF_LIVES * half_life_seconds))
