"""The usage ledger's TRAINJOBS_* variables (a section of the one Settings, service/slices.py)
and the slice the package is given."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import Field, field_validator

from service.core.section import Section
from service.usage.billing import DEFAULT_BILLING_WEIGHTS, MAX_BILLING_WEIGHTS


@dataclass(frozen=True)
class UsageSettings:
    billing_weights: dict[str, float] = field(default_factory=dict)   # TRAINJOBS_USAGE_BILLING_WEIGHTS
    half_life_seconds: float = 7 * 86_400.0                           # TRAINJOBS_USAGE_HALF_LIFE_SECONDS
    recompute_seconds: float = 300.0                                  # TRAINJOBS_USAGE_RECOMPUTE_SECONDS


class UsageEnv(Section):
    """The usage ledger (service/usage, docs/queue.md "The usage ledger"): decayed use drives fair share."""

    usage_billing_weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_BILLING_WEIGHTS), description='Billing units per resource-hour, '
        'like Slurm\'s TRESBillingWeights, e.g. {"gpu:NVIDIA_TESLA_A100": 10, "vcpu": 0.1}; "gpu:*" is any '
        'accelerator type without a weight of its own; a resource with no weight costs nothing. Replaces the '
        'defaults whole')
    usage_half_life_seconds: float = Field(
        7 * 86_400, ge=3600, le=30 * 86_400, description="Past use counts half as much after this long (Slurm's "
        "PriorityDecayHalfLife): 1 hour to 30 days")
    usage_recompute_seconds: float = Field(
        300.0, ge=1, le=300, description="How often the controller folds running and ended jobs into the usage "
        "ledger (at most every 5 minutes)")

    @field_validator("usage_billing_weights")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        if len(value) > MAX_BILLING_WEIGHTS:
            raise ValueError(f"at most {MAX_BILLING_WEIGHTS} resources may have a billing weight")
        for name, weight in value.items():
            if not name or len(name) > 96:
                raise ValueError(f"a resource name is 1 to 96 characters: {name[:100]!r}")
            if not math.isfinite(weight) or not 0 <= weight <= 1e6:
                raise ValueError(f"the weight of {name!r} must be a number from 0 to 1000000, not {weight}")
        return value
