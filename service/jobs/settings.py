"""What submitting and following jobs need of the settings, built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import Field, field_validator

from service.core.section import Section
from service.jobs.epochs import EpochLimits

MAX_PRICED_RESOURCES = 64


@dataclass(frozen=True)
class JobSettings:
    default_backend: str       # TRAINJOBS_DEFAULT_BACKEND
    epochs: EpochLimits        # TRAINJOBS_JOB_EPOCHS_*
    placement_prices: dict[str, dict[str, float]] = field(default_factory=dict)   # TRAINJOBS_PLACEMENT_PRICES
    placement_max_start_by_seconds: int = 30 * 86_400                           # TRAINJOBS_PLACEMENT_MAX_START_BY_SECONDS


class JobsEnv(Section):
    """Submitting jobs (the submit's caches) and following their epochs."""

    template_cache_size: int = Field(
        256, ge=0, le=100_000, description="Template versions each API process keeps parsed and checked for "
                                           "submits (versions never change; 0: parse on every submit), and "
                                           "as many templates' last read heads, which a repeat submit checks in "
                                           "its one writing statement instead of reading them first")
    compile_cache_bytes: int = Field(
        16 * 1024 * 1024, ge=0, le=1 << 34,
        description="JSON bytes of compiled jobs each API process keeps, so that a submit of the same template "
                    "version with the same parameters and overrides reuses the compile and the price (0: "
                    "compile every submit); one job above a tenth of it is not kept")
    job_epochs_max_per_job: int = Field(1000, ge=1, le=1_000_000, description="Epochs kept per job: the "
                                        "latest this many; older rows are dropped as new ones arrive")
    job_epochs_max_metrics: int = Field(64, ge=1, le=1000, description="Metrics kept per epoch (by name); "
                                        "the rest of a larger dict is dropped")
    placement_prices: dict[str, dict[str, float]] = Field(
        default_factory=dict, description='A price per resource-hour for each backend without a list price, '
        'which a job preferring `cheapest` is placed by (docs/queue.md, "Cheapest or soonest"), e.g. {"slurm": '
        '{"gpu:NVIDIA_TESLA_A100": 1.2, "core": 0.01}, "local": {"core": 0.005}}; a resource not named costs '
        'nothing there. A backend not named that runs jobs on Vertex AI is priced from the price table; any '
        'other has no price (after the priced ones)')
    placement_max_start_by_seconds: int = Field(
        30 * 86_400, ge=60, le=366 * 86_400, description="The furthest from its submit a job's placement.start_by "
        "may be (a later one is refused with a 422)")

    @field_validator("placement_prices")
    @classmethod
    def _prices(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for backend, prices in value.items():
            if not backend or len(backend) > 32:
                raise ValueError(f"a backend name is 1 to 32 characters: {backend[:40]!r}")
            if len(prices) > MAX_PRICED_RESOURCES:
                raise ValueError(f"{backend}: at most {MAX_PRICED_RESOURCES} resources may have a price")
            for name, price in prices.items():
                if not name or len(name) > 96:
                    raise ValueError(f"{backend}: a resource name is 1 to 96 characters: {name[:100]!r}")
                if not math.isfinite(price) or not 0 <= price <= 1e6:
                    raise ValueError(f"{backend}: the price of {name!r} must be a number from 0 to 1000000 per "
                                     f"hour, not {price}")
        return value
