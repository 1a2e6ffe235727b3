"""The sweeps domain's TRAINJOBS_* variables; read as part of the one Settings (service/slices.py),
which cuts them into `SweepLimits` (service.py)."""
from __future__ import annotations

from pydantic import Field

from service.core.section import Section


class SweepEnv(Section):
    """Sweeps (/v1/sweeps): the controller launches each sweep's trials as jobs, as room frees."""

    sweep_max_trials: int = Field(200, ge=1, le=10_000, description="Trials one sweep may have: a grid's "
                                  "combinations, or a random search's trial_count")
    sweep_max_parallel: int = Field(20, ge=1, le=1000, description="The highest max_parallel a sweep may ask for "
                                    "(unfinished trials at once)")
    sweep_max_active_per_team: int = Field(20, ge=1, le=1000, description="Unfinished sweeps one team may have")
    sweep_interval_seconds: float = Field(2.0, gt=0, le=300, description="How often the controller looks at "
                                          "unfinished sweeps (a new sweep or a cancel also wakes it at once)")
    sweep_batch_size: int = Field(50, ge=1, le=10_000, description="Sweeps the controller looks at per pass "
                                  "(the least recently looked at first)")
