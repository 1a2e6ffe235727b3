"""The price table: per region, hourly prices of machine types and accelerators and
monthly prices of boot disks per GB, on-demand and (where known) Spot and Flex-start.

Shipped as a dated file next to this module; an operator replaces it with
TRAINJOBS_PRICE_FILE. Prices are decimal strings, never floats, so a table's figures
reach the estimate exactly as written."""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

SHIPPED = Path(__file__).with_name("prices-2026-11.json")
MAX_FILE_BYTES = 8 * 1024 * 1024

Price = Annotated[Decimal, Field(ge=0, max_digits=20, decimal_places=10, allow_inf_nan=False)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rate(_Strict):
    """One resource's prices: per hour (machines, accelerators) or per GB-month (disks).
    A strategy without a price here is "no price" in estimates, never zero."""

    on_demand: Price | None = None
    spot: Price | None = None
    flex_start: Price | None = None
    source: Annotated[str, StringConstraints(max_length=2000)] = ""


class Region(_Strict):
    machines: dict[Name, Rate] = Field(default_factory=dict)
    accelerators: dict[Name, Rate] = Field(default_factory=dict)
    disks: dict[Name, Rate] = Field(default_factory=dict, description="per GB-month")


class PriceTable(_Strict):
    date: Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    source: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    hours_per_month: Annotated[Decimal, Field(gt=0, le=744)] = Decimal("730")
    regions: dict[Name, Region]


class PriceFileError(ValueError):
    """The price file cannot be used; the message says which file, what and how to fix it."""


def load(path: Path | str | None) -> PriceTable:
    """The table in `path` (None: the shipped one)."""
    path = Path(path) if path else SHIPPED
    where = f"price file {path} (TRAINJOBS_PRICE_FILE)"
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise PriceFileError(f"{where}: larger than {MAX_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PriceFileError(f"{where}: cannot be read ({e.strerror or e}); set TRAINJOBS_PRICE_FILE to a "
                             "readable JSON file, or unset it to use the shipped table") from None
    except UnicodeDecodeError:
        raise PriceFileError(f"{where}: not UTF-8 text") from None
    try:
        # Decimals straight from the text: a float would round the figures on the way in.
        data = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as e:
        raise PriceFileError(f"{where}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    try:
        return PriceTable.model_validate(data)
    except ValidationError as e:
        lines = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
                          for err in e.errors()[:10])
        raise PriceFileError(f"{where}: {lines}. See docs/cost.md for the format") from None
