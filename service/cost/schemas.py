"""The cost estimate as jobs and dry runs show it. Amounts are decimal strings in JSON."""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, Field, PrivateAttr


class PoolCost(BaseModel):
    pool: int = Field(description="Worker pool index: 0 chief, 1 workers, 2 parameter servers or "
                                  "reduction server, 3 evaluator")
    role: str
    replica_count: int
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = Field(description="Per replica")
    boot_disk_type: str
    boot_disk_size_gb: int
    per_replica_hour: Decimal = Field(description="What one replica costs per hour (priced parts only)")
    per_hour: Decimal = Field(description="per_replica_hour times replica_count")
    missing: list[str] = Field(default_factory=list, description="Resources of this pool the price table "
                                                                 "has no price for (left out of the sums)")


class Accrued(BaseModel):
    since: datetime = Field(description="started_at")
    until: datetime = Field(description="ended_at, or now while the job runs")
    running: bool
    hours: Decimal
    amount: Decimal


class CostEstimate(BaseModel):
    note: str = Field(description="This is an estimate, not a bill: what it leaves out")
    estimate_of: str = Field(description="Where the job is priced: always Vertex AI, in the service's "
                                         "TRAINJOBS_VERTEX_LOCATION (local jobs: what they would cost there)")
    currency: str
    prices_date: str = Field(description="Date of the price table")
    prices_source: str
    region: str
    strategy: str = Field(description="The job's scheduling strategy: STANDARD, SPOT, FLEX_START, "
                                        "ON_DEMAND or LOW_COST")
    pricing: str = Field(description="Which prices apply: on_demand (STANDARD, ON_DEMAND, "
                                       "LOW_COST), spot (SPOT) or flex_start (FLEX_START)")
    pools: list[PoolCost]
    replicas: int = Field(description="Replicas in all pools")
    accelerators: dict[str, int] = Field(description="Accelerators in all pools, by type")
    complete: bool = Field(description="false: some resources have no price (see missing) and the sums "
                                       "leave them out")
    missing: list[str]
    per_hour: Decimal
    timeout_seconds: int
    timeout_from: str = Field(description="scheduling.timeout, or Vertex AI's default of 7 days")
    for_timeout: Decimal = Field(description="per_hour for the whole timeout: the most the job can cost "
                                             "(Vertex stops it then)")
    accrued: Accrued | None = Field(None, description="Cost so far, from started_at to ended_at (or now); "
                                                      "null until the job starts")

    _exact_per_hour: Decimal = PrivateAttr(default=Decimal(0))

    @property
    def exact_per_hour(self) -> Decimal:
        return self._exact_per_hour
