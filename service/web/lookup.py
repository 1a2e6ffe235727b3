"""Finding a job or sweep by what a person types: a unique id prefix (`3f2a`, as git takes
short hashes) or a display name. The list endpoints take them as filters (`id_prefix`,
`name`); the CLI resolves its arguments with them, on every page of a team's jobs."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from fastapi import Query
from pydantic import BeforeValidator

from service.core.pagination import CURSOR_PATTERN, ID_PREFIX_MAX, ID_PREFIX_MIN

IdPrefix = Annotated[str | None, Query(
    pattern=rf"^[0-9a-fA-F]{{{ID_PREFIX_MIN},{ID_PREFIX_MAX}}}$",
    description=f"Only ids starting with these hex digits ({ID_PREFIX_MIN} to {ID_PREFIX_MAX}, no dashes), "
                "e.g. 3f2a: a range of the primary key")]
NameFilter = Annotated[str | None, Query(min_length=1, max_length=128, description="Only this exact display name")]

# A page cursor is opaque: `next_cursor` of the previous page, passed back unchanged. Its
# alphabet is base64url (the pattern says so; a value outside it, or one this service did not
# hand out, answers 422 naming `cursor` and how to fix it, checked where it is decoded).
Cursor = Annotated[str | None, Query(
    max_length=512, json_schema_extra={"pattern": CURSOR_PATTERN},
    description="Opaque: the previous page's `next_cursor`, unchanged (base64url, as this service hands it out); "
                "omit it for the first page")]

# RFC 3339 date-time, as the document's `format: date-time` says: pydantic alone also takes Unix
# seconds ("0.5") and dates without a time. A time without its zone passes here and is refused
# where it is used (storable_time: "timestamp has no time zone", with the fix).
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$")


def _rfc3339(value):
    if isinstance(value, str) and not _RFC3339.match(value):
        raise ValueError("not an RFC 3339 date-time; write e.g. 2026-01-31T12:00:00Z")
    return value


Timestamp = Annotated[datetime, BeforeValidator(_rfc3339)]
