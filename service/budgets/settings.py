"""What the team-limits endpoints need of the settings, built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from service.core.section import Section


@dataclass(frozen=True)
class BudgetSettings:
    max_accelerator_types: int   # TRAINJOBS_TEAM_LIMITS_MAX_ACCELERATOR_TYPES


class BudgetsEnv(Section):
    """Team limits (docs/cost.md)."""

    team_limits_max_accelerator_types: int = Field(
        32, ge=1, le=1000, description="Accelerator types one team's limits may name")
