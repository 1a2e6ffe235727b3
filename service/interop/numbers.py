"""Whole numbers in imported configs, read without surprises: Python refuses to convert an
integer of more than 4,300 digits (ValueError, which was a 500 here and killed an import
worker: a 503), and str.isdigit() accepts characters int() refuses ("²"). No count,
size or duration a job has needs more than MAX_DIGITS digits (an int64 has 19)."""
from __future__ import annotations

from typing import Any

from service.core.errors import Problem

MAX_DIGITS = 18


def too_long(where: str, digits: int) -> Problem:
    return Problem(where, f"a number of {digits} digits; at most {MAX_DIGITS} are read",
                   "write the number the job needs, e.g. 2")


def whole(where: str, value: Any, problems: list[Problem], example: str = "2") -> int | None:
    """`value` (an int, or its decimal digits as text) as an int; None and a problem naming
    `where` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        problems.append(Problem(where, f"{value!r} is not a whole number", f"write e.g. {example}"))
        return None
    if isinstance(value, int):  # from the YAML reader (safe_yaml bounds its digits too)
        if value >= 10 ** MAX_DIGITS:
            problems.append(too_long(where, int(value.bit_length() * 0.30103) + 1))
            return None
        if value < 0:
            problems.append(Problem(where, f"{value!r} is not a whole number", f"write e.g. {example}"))
            return None
        return value
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        problems.append(Problem(where, f"{_short(value)!r} is not a whole number", f"write e.g. {example}"))
        return None
    if len(text) > MAX_DIGITS:
        problems.append(too_long(where, len(text)))
        return None
    return int(text)


def _short(value: str) -> str:
    return value if len(value) <= 40 else value[:40] + "…"
