"""What the team-limits endpoints need of the settings, built by service/slices.py.
No defaults here: the one Settings (service/core/config.py) holds and documents them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BudgetSettings:
    max_accelerator_types: int   # TRAINJOBS_TEAM_LIMITS_MAX_ACCELERATOR_TYPES
