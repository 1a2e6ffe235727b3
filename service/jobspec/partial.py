"""A merged spec validated as far as it goes: its schema problems, and a JobSpec with the
fields that did not validate dropped (their defaults in their place), so the semantic
checks (validate.check_spec) can still run every rule that does not read a dropped field.
Without it one bad field (workers.replica_count 0) hid every other rule's problem (the
chief's count) until it was fixed."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from service.core.errors import Problem
from service.jobspec.spec import JobSpec

# A required field's stand-in once it is dropped: nothing semantic reads the container.
MAX_ROUNDS = 64   # a spec that needs more is hostile; its semantic checks then wait
_REQUIRED = {"container": {"image_uri": "unknown"}}


@dataclass(frozen=True)
class Partial:
    spec: JobSpec | None            # None: not even the stand-ins validated (nothing semantic can run)
    problems: list[Problem]         # the schema's problems, as pydantic_problems words them
    unknown: frozenset[str]         # dotted paths dropped from `spec` (validate.check_spec's `unknown`)
    complete: bool                  # nothing was dropped: `spec` is the merged spec itself


def validated(data: Any, problems_of) -> Partial:
    """`data` as a JobSpec; `problems_of(err)` words a ValidationError (jobspec.pydantic_problems).
    Every round drops at least one key, so the rounds are bounded by the spec's size."""
    try:
        return Partial(JobSpec.model_validate(data), [], frozenset(), True)
    except ValidationError as e:
        first = e
    problems = problems_of(first)
    if not isinstance(data, dict):
        return Partial(None, problems, frozenset({""}), False)
    work, err = copy.deepcopy(data), first
    unknown: set[str] = set()
    for _ in range(MAX_ROUNDS):
        dropped = [_drop(work, tuple(x["loc"]), x["type"]) for x in err.errors(include_url=False)]
        if not any(d is not None for d in dropped):
            return Partial(None, problems, frozenset(unknown | {""}), False)
        unknown |= {d for d in dropped if d is not None}
        try:
            return Partial(JobSpec.model_validate(work), problems, frozenset(unknown), False)
        except ValidationError as e:
            err = e
    return Partial(None, problems, frozenset(unknown | {""}), False)


def _drop(data: dict, loc: tuple, kind: str) -> str | None:
    """Drop the deepest key on `loc` that `data` has (a missing field: its parent) and
    return its dotted path; None if nothing could be dropped."""
    path: list[str] = []
    place: Any = data
    for part in loc:
        if not (isinstance(place, dict) and isinstance(part, str) and part in place):
            break
        path.append(part)
        place = place[part]
    if kind == "missing" and len(path) == len(loc):
        return None   # cannot happen: a missing field is not in `data`
    if not path:
        name = loc[0] if loc and isinstance(loc[0], str) else None
        if kind == "missing" and name in _REQUIRED and name not in data:
            data[name] = copy.deepcopy(_REQUIRED[name])
            return name
        return None
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    if path[0] in _REQUIRED and len(path) == 1:
        parent[path[0]] = copy.deepcopy(_REQUIRED[path[0]])
    else:
        del parent[path[-1]]
    return ".".join(path)
