"""What a job may change in its template: the template's `overridable` field
paths, and which fields a merge patch actually changes.

A path is dotted, over the spec's fields (`workers.replica_count`), and may end in
a key of a map (`container.env.BATCH_SIZE`, `labels.team`). It covers everything
beneath it, except the SENSITIVE fields: the code a replica runs, the identity and
network it runs with, where it writes and who can open a shell in it. Those are
granted only by naming them (or something inside them), never by a parent path,
so `workers` lets a member resize the workers but not change their command.

Environment variable names are an allow-list: a grant of a container (or of its
`env` map) lets a member change the values of the names the template sets there
itself; a name the template does not set is one a member may add only if
`overridable` lists it by name (`container.env.BATCH_SIZE`). Names that change how
programs start (env_policy) are never the members', listed or not."""
from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from service.core.errors import Problem
from service.jobspec.spec import JobSpec

Path = tuple[str, ...]
ROLES = ("chief", "workers", "parameter_servers", "evaluator")
SENSITIVE: tuple[Path, ...] = (
    ("container",), *((role, "container") for role in ROLES), ("reduction_server", "image_uri"),
    ("service_account",), ("network",), ("base_output_directory",), ("enable_web_access",),
    ("model_upload", "serving_container_image_uri"),  # the code that serves the model
)
NOT_A_PATH = {"overridable"}  # the template's own policy: no job changes it
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,255}$")


def _unwrap(annotation: Any) -> Any:
    """The model, dict or leaf type behind Optional[...] / Annotated[...]."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def parse(text: str) -> tuple[Path | None, str]:
    """(path, "") for a valid path, else (None, why)."""
    parts = tuple(text.split("."))
    model: Any = JobSpec
    for i, part in enumerate(parts):
        if model == "map":
            if i != len(parts) - 1 or not _KEY.match(part):
                return None, f"{'.'.join(parts[:i])} is a map: a path may name one key in it and end there"
            return parts, ""
        if not _is_model(model):
            return None, f"{'.'.join(parts[:i])} has no fields beneath it"
        fields = [f for f in model.model_fields if not (model is JobSpec and f in NOT_A_PATH)]
        if part not in fields:
            where = ".".join(parts[:i]) or "the spec"
            return None, f"{where} has no field {part!r}; its fields are {', '.join(fields)}"
        child = _unwrap(model.model_fields[part].annotation)
        model = "map" if typing.get_origin(child) is dict else child
    return parts, ""


def check_declared(paths: list[str]) -> list[Problem]:
    from service.jobspec import env_policy

    problems = []
    for i, text in enumerate(paths):
        path, why = parse(text)
        if path is None:
            problems.append(Problem(f"overridable[{i}]", f"unknown field path {text!r}: {why}",
                                    "use a dotted path to a spec field, e.g. workers.replica_count "
                                    "or container.env.BATCH_SIZE"))
        elif _is_env_name(path) and (env_policy.is_reserved(path[-1]) or env_policy.is_startup(path[-1])):
            problems.append(Problem(f"overridable[{i}]", f"{path[-1]} is set by the service, or changes how a "
                                    "program, loader or library starts: members may never set it",
                                    "remove it from overridable (the template may set it itself)"))
    return problems


def _is_env_name(path: Path) -> bool:
    """container.env.NAME or <role>.container.env.NAME."""
    return (len(path) == 3 and path[:2] == ("container", "env")) or \
        (len(path) == 4 and path[0] in ROLES and path[1:3] == ("container", "env"))


def env_outside(template_spec: dict, allowed: Iterable[Path], changed: Iterable[Path]) -> list[Path]:
    """Environment names a member's changes add that a grant of the whole container or env map
    covers but the template does not set there, nor list by name: the allow-list's refusals."""
    from service.jobspec import env_policy

    allowed = set(allowed)
    out = []
    for path in changed:
        if not _is_env_name(path) or path in allowed or not permits(allowed, path):
            continue
        if env_policy.is_reserved(path[-1]):
            continue  # refused for everyone, admins too, with its own reason (env_policy.reserved_problems)
        place: Any = template_spec
        for key in path[:-1]:
            place = place.get(key) if isinstance(place, dict) else None
        if not (isinstance(place, dict) and path[-1] in place):
            out.append(path)
    return out


def declared(spec: dict) -> list[Path]:
    """The stored template's paths (validated when it was stored; bad ones are ignored)."""
    out = []
    for text in spec.get("overridable") or []:
        path, _ = parse(text) if isinstance(text, str) else (None, "")
        if path is not None:
            out.append(path)
    return out


def permits(allowed: Iterable[Path], path: Path) -> bool:
    """A declared path d grants `path` if d is a prefix of it and no sensitive field
    lies strictly between d and `path` (a sensitive field must be named itself)."""
    guards = [s for s in SENSITIVE if path[:len(s)] == s]
    return any(path[:len(d)] == d and all(len(d) >= len(s) for s in guards) for d in allowed)


def _canon(value: Any) -> str:
    # 1, 1.0 and true compare equal in Python; as JSON they are different changes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _leaves(value: Any, prefix: Path) -> list[Path]:
    out: list[Path] = []
    stack = [(value, prefix)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                out.append(where + (str(k),))
                stack.append((v, where + (str(k),)))
    return out


def changed_paths(target: Any, patch: dict, prefix: Path = ()) -> list[Path]:
    """Every path whose value the merge patch changes. Creating an object counts as
    changing it and every field given in it; removing or replacing one counts as
    changing everything that was beneath it. Setting a field to its current value
    changes nothing. The caller bounds the patch's depth."""
    out: list[Path] = []
    for key, value in patch.items():
        path = prefix + (str(key),)
        has = isinstance(target, dict) and key in target
        current = target[key] if has else None
        if isinstance(value, dict):
            if isinstance(current, dict):
                out += changed_paths(current, value, path)
            else:
                out.append(path)
                out += changed_paths({}, value, path)
        elif value is None:
            if has:
                out.append(path)
                out += _leaves(current, path)
        elif not has or _canon(value) != _canon(current):
            out.append(path)
            out += _leaves(current, path)
    return list(dict.fromkeys(out))


def text(path: Path) -> str:
    return ".".join(path)
