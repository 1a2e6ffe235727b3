"""Formatting helpers for the pages: relative times, durations, numbers."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from service.scheduling.explain import amount


def age(at: datetime | None, now: datetime | None = None) -> str:
    if at is None:
        return "—"
    return duration((now or datetime.now(UTC)) - at) + " ago"


def duration_between(start: datetime | None, end: datetime | None, now: datetime | None = None) -> str:
    if start is None:
        return "—"
    return duration((end or now or datetime.now(UTC)) - start)


def duration(delta) -> str:
    s = max(0, int(delta.total_seconds()))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def seconds(n: float | None) -> str:
    """A number of seconds as duration() writes a length of time ('3m 05s'); '—' for none."""
    return "—" if n is None else duration(timedelta(seconds=n))


def iso(at: datetime | None) -> str:
    # Fixed width (microseconds always), so the pages' scripts order these as strings.
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if at else ""


def when(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "—"


def clock(at: datetime | None) -> str:
    """A log line's time of day in UTC with milliseconds (`08:35:09.123`); the title has the date."""
    return at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3] if at else "—"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return str(value)


def declared(value: Any, type_: str | None = None) -> str:
    """A template's value as it declares it, in JSON's words: `true` not Python's `True`, an
    int parameter's bound `1` not the stored `1.0`."""
    if isinstance(value, float) and type_ == "int" and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def money(value: Any) -> str:
    """An amount as people read prices: cents (`0.98`, `1,234.50`), and three significant digits
    below a dime, where cents would say nothing (`0.0233`). The API keeps the six decimals."""
    v = Decimal(str(value))
    if v == 0 or abs(v) >= Decimal("0.1"):
        return f"{v:,.2f}"
    return f"{v:.3g}" if abs(v) >= Decimal("0.001") else f"{v:.2e}"


def span(seconds: int) -> str:
    """A length of time in words, at its largest whole unit: `7 days`, `2 hours`, `90 minutes`."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}" if seconds < 3600 else f"{seconds / 3600:.1f} hours"


def amounts(values: dict[str, int] | None, zeros: bool = False) -> str:
    """Resources as people read them, in the scheduler's words: `1 core`, `4 cores`, `8 vCPUs,
    2 NVIDIA_TESLA_A100`; `—` for none (amounts of 0 shown only with `zeros`: `free 0 cores`)."""
    shown = [amount(n, r) for r, n in sorted((values or {}).items()) if n or zeros]
    return ", ".join(shown) if shown else "—"
