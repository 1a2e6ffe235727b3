"""Opaque cursors for keyset pagination: the sort key of the last row seen."""
from __future__ import annotations

import base64
import json

from service.errors import Problem, Invalid


def encode_cursor(*values) -> str:
    raw = json.dumps([str(v) for v in values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, n: int) -> list[str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(values, list) or len(values) != n or not all(isinstance(v, str) for v in values):
            raise ValueError
        return values
    except (ValueError, UnicodeDecodeError, json.JSONDecodeError):
        raise Invalid.of([Problem("cursor", "not a cursor this service handed out",
                                  "pass next_cursor from the previous page unchanged, or omit it")]) from None
