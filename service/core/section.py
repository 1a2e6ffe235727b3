"""The one way TRAINJOBS_* variables are read: a `Section`, pydantic settings with that prefix.

Each package declares the variables it owns as a Section of its own (service/<package>/settings.py,
a backend's in its package): the field's name is the variable without `TRAINJOBS_`, its default,
limits and description are stated there once. The composition root (service/slices.py) joins
every section into the one `Settings` the process reads at start, and hands each package the
slice cut from it; docs/settings.md is generated from the sections (scripts/settings_doc.py)."""
from __future__ import annotations

import json
from typing import Literal, get_args, get_origin

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict


class Section(BaseSettings):
    # extra="ignore": the environment holds every package's variables; a section reads its own.
    model_config = SettingsConfigDict(env_prefix="TRAINJOBS_", extra="ignore")


def sections(settings: type[BaseSettings]) -> list[type[Section]]:
    """The sections joined into `settings`, in the order its bases name them."""
    return [c for c in settings.__mro__ if isinstance(c, type) and issubclass(c, Section) and c is not Section
            and _own_fields(c)]


def document(settings: type[BaseSettings]) -> str:
    """docs/settings.md's list of every variable: a table per section, from the sections themselves
    (scripts/settings_doc.py writes it there; tests/core/test_settings_doc.py checks it is current)."""
    out = []
    for section in sections(settings):
        path = section.__module__.replace(".", "/") + ".py"
        title = (section.__doc__ or section.__name__).split("\n\n")[0].split(". ")[0].strip().rstrip(".")
        out += [f"### {' '.join(title.split())} ({path})", "", "| variable | default | allowed | meaning |",
                "|---|---|---|---|"]
        for name in _own_fields(section):
            field = section.model_fields[name]
            out.append(f"| `TRAINJOBS_{name.upper()}` | {_default(field)} | {_allowed(field)} | "
                       f"{_cell(field.description or '')} |")
        out.append("")
    return "\n".join(out)


def _own_fields(section: type) -> list[str]:
    return [n for n in vars(section).get("__annotations__", {}) if n in section.model_fields]   # type: ignore[attr-defined]


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "(secret)"
    return f"`{json.dumps(value, default=str) if isinstance(value, (bool, list, dict)) else value}`"


def _allowed(field: FieldInfo) -> str:
    bounds = []
    for rule in field.metadata:
        for attr, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "length ≥"),
                           ("max_length", "length ≤")):
            if getattr(rule, attr, None) is not None:
                bounds.append(f"{word} {getattr(rule, attr):,}".replace(",", " "))
    if get_origin(field.annotation) is Literal:
        bounds.append(" or ".join(f"`{v}`" for v in get_args(field.annotation)))
    return ", ".join(bounds)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
