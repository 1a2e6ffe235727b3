"""A job's cost from the price table: per pool, per hour, up to its timeout, and accrued.

Decimal from the table to the answer (no float on the way); amounts are rounded to
micro-units (6 places) only when shown. A resource without a price is named in
`missing` ("no price for X in region Y") and left out of the sums, never guessed."""
from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from service.cost.prices import PriceTable, Rate
from service.cost.schemas import Accrued, CostEstimate, PoolCost

VERTEX_DEFAULT_TIMEOUT_SECONDS = 7 * 24 * 3600
MICRO = Decimal("0.000001")
_US_PER_HOUR = Decimal(3_600_000_000)
ROLES = ("chief", "workers", "parameter servers or reduction server", "evaluator")
# Which prices each Scheduling.Strategy is estimated at (docs/vertex.md, "Scheduling strategies").
PRICING = {"STANDARD": "on_demand", "SPOT": "spot", "FLEX_START": "flex_start",
           "ON_DEMAND": "on_demand", "LOW_COST": "on_demand"}
# What an estimate must add for a strategy whose price is not simply its column.
STRATEGY_NOTES = {
    "ON_DEMAND": " ON_DEMAND is the deprecated name of STANDARD: on-demand prices.",
    "LOW_COST": " LOW_COST (deprecated by Google) lets Vertex AI use Spot VMs for some of the job; which, "
                "is not known in advance, so it is priced at on-demand prices: the most it can cost.",
}
NOTE = ("An estimate from the list prices in the price table, not a bill: discounts, taxes, "
        "network, storage outside the boot disks and time before the replicas start are not in it.")


def money(value: Decimal) -> Decimal:
    return value.quantize(MICRO, rounding=ROUND_HALF_UP)


def micros(value: Decimal) -> int:
    """Integer micro-units (what budgets add up and compare)."""
    return int((value / MICRO).to_integral_value(rounding=ROUND_HALF_UP))


def timeout_of(job_spec: dict) -> tuple[int, bool]:
    """(seconds, set by the job): Vertex stops a job after its scheduling timeout, 7 days if none."""
    raw = (job_spec.get("scheduling") or {}).get("timeout")
    if raw:
        return int(Decimal(str(raw).rstrip("s"))), True
    return VERTEX_DEFAULT_TIMEOUT_SECONDS, False


def _price(rate: Rate | None, pricing: str) -> Decimal | None:
    return None if rate is None else getattr(rate, pricing)


def _pool(index: int, pool: dict, region: str, prices: Any, pricing: str,
          hours_per_month: Decimal) -> tuple[PoolCost, Decimal]:
    machine = pool.get("machineSpec") or {}
    disk = pool.get("diskSpec") or {}
    replicas = int(pool.get("replicaCount") or 1)
    mtype = machine.get("machineType", "")
    atype = machine.get("acceleratorType")
    acount = int(machine.get("acceleratorCount") or 0) if atype else 0
    dtype = disk.get("bootDiskType", "pd-ssd")
    dsize = int(disk.get("bootDiskSizeGb") or 100)
    what = "" if pricing == "on_demand" else f" ({pricing.replace('_', '-')})"
    missing: list[str] = []
    per_replica = Decimal(0)

    def add(kind: str, name: str, table: dict, factor: Decimal) -> None:
        nonlocal per_replica
        price = _price(table.get(name) if prices is not None else None, pricing)
        if price is None:
            missing.append(f"no {kind} price{what} for {name} in region {region}")
        else:
            per_replica += price * factor

    add("machine", mtype, prices.machines if prices else {}, Decimal(1))
    if atype and acount:   # a count only with a type (acount above)
        add("accelerator", atype, prices.accelerators if prices else {}, Decimal(acount))
    add("disk", dtype, prices.disks if prices else {}, Decimal(dsize) / hours_per_month)
    line = PoolCost(pool=index, role=ROLES[index] if index < len(ROLES) else f"pool {index}",
                    replica_count=replicas, machine_type=mtype, accelerator_type=atype if acount else None,
                    accelerator_count=acount, boot_disk_type=dtype, boot_disk_size_gb=dsize,
                    per_replica_hour=money(per_replica), per_hour=money(per_replica * replicas), missing=missing)
    return line, per_replica * replicas


def estimate(custom_job: dict, table: PriceTable, region: str, *, backend: str,
             runs_on: str | None = None) -> CostEstimate:
    """What `custom_job` (the CustomJob as JSON) costs on Vertex AI in `region`. `runs_on`: where
    the `backend` runs it instead, in words (its Capabilities.runs_on); None: on Vertex AI."""
    spec = custom_job.get("jobSpec") or {}
    strategy = (spec.get("scheduling") or {}).get("strategy") or "STANDARD"
    pricing = PRICING.get(strategy, "on_demand")
    prices = table.regions.get(region)
    lines = [_pool(i, p, region, prices, pricing, table.hours_per_month)
             for i, p in enumerate(spec.get("workerPoolSpecs") or []) if p]
    pools = [line for line, _ in lines]
    missing = list(dict.fromkeys(m for p in pools for m in p.missing))
    if prices is None:
        missing.insert(0, f"no prices for region {region} in the price table")
    # The sum of the exact per-pool figures, rounded once.
    per_hour = sum((exact for _, exact in lines), Decimal(0))
    seconds, explicit = timeout_of(spec)
    accelerators: dict[str, int] = {}
    for p in pools:
        if p.accelerator_type:
            accelerators[p.accelerator_type] = accelerators.get(p.accelerator_type, 0) + \
                p.accelerator_count * p.replica_count
    on = f"Vertex AI in {region}" if runs_on is None else (
        f"Vertex AI in {region}: the {backend} backend runs this job on {runs_on}; this is what it "
        "would cost on Vertex AI")
    out = CostEstimate(
        note=NOTE + STRATEGY_NOTES.get(strategy, ""), estimate_of=on, currency=table.currency, prices_date=table.date,
        prices_source=table.source, region=region, strategy=strategy, pricing=pricing, pools=pools,
        replicas=sum(p.replica_count for p in pools), accelerators=accelerators, complete=not missing,
        missing=missing, per_hour=money(per_hour), timeout_seconds=seconds,
        timeout_from="scheduling.timeout" if explicit else
        "Vertex AI's default of 7 days (the job sets no scheduling timeout)",
        for_timeout=money(per_hour * Decimal(seconds) / 3600))
    out._exact_per_hour = per_hour
    return out


def hours_between(start: datetime, end: datetime) -> Decimal:
    return Decimal(max(end - start, timedelta(0)) // timedelta(microseconds=1)) / _US_PER_HOUR


def accrued(est: CostEstimate, started_at: datetime | None, ended_at: datetime | None,
            now: datetime) -> Accrued | None:
    """Cost so far: the hourly rate times the time since the job started (to its end, or now)."""
    if started_at is None:
        return None
    end = ended_at or now
    hours = hours_between(started_at, end)
    return Accrued(since=started_at, until=end, running=ended_at is None, hours=hours.quantize(MICRO),
                   amount=money(est.exact_per_hour * hours))


class Pricer:
    """The service's price table and the region it prices jobs in (Services.pricer)."""

    def __init__(self, table: PriceTable, region: str) -> None:
        self.table = table
        self.region = region

    def estimate(self, custom_job: dict, backend: str, runs_on: str | None = None) -> CostEstimate:
        return estimate(custom_job, self.table, self.region, backend=backend, runs_on=runs_on)
