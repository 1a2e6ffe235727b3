"""The cost domain's TRAINJOBS_* variables (docs/cost.md); read as part of the one Settings
(service/slices.py)."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field

from service.core.section import Section


class CostEnv(Section):
    """Prices (docs/cost.md)."""

    price_file: Path | None = Field(
        None, description="JSON price table (docs/cost.md) that replaces the shipped one "
                          "(service/cost/prices-2026-11.json); checked at startup, which fails on a bad file")
    cost_region: str | None = Field(None, max_length=64, description="Region jobs are priced in (local jobs "
                                    "too: what they would cost on Vertex AI). Default: TRAINJOBS_VERTEX_LOCATION")
