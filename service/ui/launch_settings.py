"""The launch form's fields for the settings a template lets members change
(its `overridable` paths): replica counts, machine and accelerator per role.
What they change becomes a merge patch under the form's advanced JSON overrides
(the JSON is applied over them, so it can still say anything the fields say)."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from service.jobspec import overridable
from service.jobspec.merge_patch import merge_patch

ROLES = ("chief", "workers", "parameter_servers", "evaluator")
# A role's settings and the spec's defaults for them (service/jobspec/spec.py Machine, Role).
KEYS: tuple[tuple[str, Any], ...] = (("replica_count", 1), ("machine_type", "n1-standard-4"),
                                      ("accelerator_type", None), ("accelerator_count", 0))
LIMITS = {"replica_count": (1, 1000), "accelerator_count": (0, 16), "timeout_seconds": (1, 7 * 24 * 3600)}
# Settings outside the roles (service/jobspec/spec.py Scheduling); blank is "not set" (Vertex
# AI's default timeout of 7 days).
SCHEDULING: tuple[tuple[str, Any], ...] = (("timeout_seconds", None),)
OPTIONAL = {"timeout_seconds"}


@dataclass
class SettingField:
    role: str
    key: str
    value: str                    # as the form shows it ("" is no accelerator)
    base: Any                     # the template's value: the field changes the job only if it differs
    choices: list[str] | None     # machine and accelerator selects
    error: str | None = None

    @property
    def name(self) -> str:
        return f"set.{self.role}.{self.key}"

    @property
    def input_id(self) -> str:
        return f"set-{self.role}-{self.key}"

    @property
    def limits(self) -> tuple[int, int] | None:
        return LIMITS.get(self.key)


def fields(spec: dict, machines: Iterable[str], accelerators: Iterable[str],
           overrides: Any = None) -> list[SettingField]:
    """A field for each setting the template grants members, filled with the template's value
    (or, for "launch again", the value after that job's overrides)."""
    granted = overridable.declared(spec)
    shown = merge_patch(spec, overrides) if isinstance(overrides, dict) else spec
    out = []
    for role in ROLES:
        if not isinstance(spec.get(role), dict):
            continue
        for key, default in KEYS:
            if (role == "chief" and key == "replica_count") or not overridable.permits(granted, (role, key)):
                continue
            base = spec[role].get(key, default)
            current = (shown.get(role) or {}).get(key, default) if isinstance(shown.get(role), dict) else base
            value = "" if current is None else str(current)
            choices = None
            if key == "machine_type":
                choices = sorted({*machines, value}, key=_natural)
            elif key == "accelerator_type":
                choices = ["", *sorted({*accelerators, value} - {""}, key=_natural)]
            out.append(SettingField(role, key, value, base, choices))
    for key, default in SCHEDULING:
        if overridable.permits(granted, ("scheduling", key)):
            base = (spec.get("scheduling") or {}).get(key, default)
            current = (shown.get("scheduling") or {}).get(key, default) if isinstance(shown.get("scheduling"), dict) \
                else base
            out.append(SettingField("scheduling", key, "" if current is None else str(current), base, None))
    return out


def _natural(name: str) -> list:
    """n1-standard-4 before n1-standard-16: the numbers in a name compared as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def read(settings: list[SettingField], form: Mapping[str, Any]) -> dict | None:
    """Fill the fields from a posted form; the merge patch of what differs from the template
    (None if a field is unreadable: its error says why)."""
    patch: dict[str, dict] = {}
    for f in settings:
        raw = str(form.get(f.name) or "").strip()
        f.value = raw
        value: Any
        if f.limits is not None:
            lo, hi = f.limits
            if not raw and f.key in OPTIONAL:
                value = None
            elif not raw:
                f.error = f"enter a number (the template's is {f.base})"
                continue
            else:
                try:
                    value = int(raw)
                except ValueError:
                    f.error = "a whole number, e.g. 2"
                    continue
                if not lo <= value <= hi:  # worded as the service words its bounds (jobspec)
                    side = f"below the minimum {lo}" if value < lo else f"above the maximum {hi}"
                    f.error = f"{value} is {side} — use a value between {lo} and {hi}"
                    continue
        else:
            value = raw or None
            if f.choices is not None and raw not in f.choices:
                f.error = "pick one of the list"
                continue
            if f.key == "machine_type" and value is None:
                f.error = "required"
                continue
        if value != f.base:
            patch.setdefault(f.role, {})[f.key] = value
    if any(f.error for f in settings):
        return None
    return patch


def combine(from_fields: dict, advanced: Any) -> Any:
    """The fields' patch with the advanced JSON over it, both kept as patches: a null in the
    JSON stays a null (it removes a role), where merge_patch would drop it."""
    if not isinstance(advanced, dict):
        return advanced if advanced is not None or not from_fields else from_fields
    out = dict(from_fields)
    for k, v in advanced.items():
        out[k] = combine(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out
