"""Finding a job or sweep by what a person types: a unique id prefix (`3f2a`, as git takes
short hashes) or a display name. The list endpoints take them as filters (`id_prefix`,
`name`); the CLI resolves its arguments with them, on every page of a team's jobs."""
from __future__ import annotations

from typing import Annotated

from fastapi import Query

from service.core.pagination import ID_PREFIX_MAX, ID_PREFIX_MIN

IdPrefix = Annotated[str | None, Query(
    pattern=rf"^[0-9a-fA-F]{{{ID_PREFIX_MIN},{ID_PREFIX_MAX}}}$",
    description=f"Only ids starting with these hex digits ({ID_PREFIX_MIN} to {ID_PREFIX_MAX}, no dashes), "
                "e.g. 3f2a: a range of the primary key")]
NameFilter = Annotated[str | None, Query(min_length=1, max_length=128, description="Only this exact display name")]
