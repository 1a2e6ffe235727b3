"""Opaque cursors for keyset pagination: the sort key of the last row seen.
And the time bounds every stored or compared timestamp must meet."""
from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from datetime import UTC, datetime

from service.core.errors import Invalid, Problem

# What encode_cursor hands out: base64url without padding. Checked before decoding (the decoder
# alone skips characters outside its alphabet, so "ab!c" read as "abc").
CURSOR_PATTERN = r"^[A-Za-z0-9_-]*$"
_CURSOR = re.compile(CURSOR_PATTERN)


def encode_cursor(*values) -> str:
    raw = json.dumps([str(v) for v in values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_cursor() -> Invalid:
    return Invalid.of([Problem("cursor", "not a cursor this service handed out",
                               "pass next_cursor from the previous page unchanged, or omit it")])


def decode_cursor(cursor: str, n: int) -> list[str]:
    if not _CURSOR.match(cursor):
        raise _bad_cursor()
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(values, list) or len(values) != n or not all(isinstance(v, str) for v in values):
            raise ValueError
        return values
    except (ValueError, UnicodeDecodeError, binascii.Error, RecursionError):
        raise _bad_cursor() from None


def storable_time(value: datetime | None, field: str) -> datetime | None:
    """An aware timestamp that both databases store and compare: its UTC instant must
    fall within years 1 to 9999 (0001-01-01T00:00:00+14:00 is in year 0 in UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise Invalid.of([Problem(field, "timestamp has no time zone",
                                  "use RFC 3339 with a zone, e.g. 2026-01-31T12:00:00Z")])
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise Invalid.of([Problem(field, "timestamp is outside years 0001 to 9999 once converted to UTC",
                                  "use a time between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z")]) from None
    return value


def decode_time_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """A (created_at, id) keyset cursor, checked as strictly as a query parameter."""
    at, jid = decode_cursor(cursor, 2)
    try:
        key = (datetime.fromisoformat(at), uuid.UUID(jid))
    except ValueError:
        raise _bad_cursor() from None
    if key[0].tzinfo is None:
        raise _bad_cursor()
    try:
        storable_time(key[0], "cursor")
    except Invalid:
        raise _bad_cursor() from None
    return key


# Finding a job or sweep by a unique id prefix (`3f2a`, as git takes short hashes): 4 hex digits at
# least (shorter prefixes match too much to be worth a lookup); service/web/lookup.py declares the filter.
ID_PREFIX_MIN, ID_PREFIX_MAX = 4, 32


def id_range(prefix: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The first and last UUID starting with `prefix`: a range scan of the primary key on both
    databases (PostgreSQL compares uuids bytewise, SQLite stores them as 32 lowercase hex digits)."""
    p = prefix.lower()
    return uuid.UUID(p.ljust(32, "0")), uuid.UUID(p.ljust(32, "f"))
