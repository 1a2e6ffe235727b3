"""Priority classes on the pages: the launch form's class picker (the classes the member's team
may use, each with its description), the class a job, a template or a preview runs at, and the
queue's priorities named by their class. The classes are read through the capacity domain's
store (GET /v1/priority-classes answers the same); a class the team may not use is refused
beside the field, naming only the classes it may use."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from service.capacity import store
from service.capacity.schemas import PriorityClassOut
from service.jobspec import overridable
from service.web.container import SessionDep


def classes(session: SessionDep, team: str) -> list[PriorityClassOut]:
    """Every class, highest first, each saying whether `team` may use it."""
    return store.classes(session, team)


@dataclass
class PriorityField:
    """The launch form's priority class: a select of the usable classes where the template lets
    members change it (`open`), else the template's class as text."""

    base: str | None                      # the template's class (None: no class, priority 0)
    value: str                            # the class the form holds ("" = none)
    choices: list[PriorityClassOut] = field(default_factory=list)   # the classes the team may use
    open: bool = False
    error: str | None = None
    input_id: str = "priority_class"

    @property
    def name(self) -> str:
        return "priority_class"

    def described(self, name: str | None) -> str:
        return describe(name, self.choices)


def describe(name: str | None, known: Iterable[PriorityClassOut]) -> str:
    """`batch (50): nightly work that may wait`, or `none (priority 0)`."""
    if not name:
        return "none (priority 0)"
    found = next((c for c in known if c.name == name), None)
    if found is None:
        return name
    return f"{found.name} ({found.value})" + (f": {found.description}" if found.description else "")


def field_for(spec: dict, known: list[PriorityClassOut], overrides: Any = None) -> PriorityField | None:
    """The form's field, filled with the template's class (or a job's, for "launch again");
    None where the template names no class and the service has none to pick from."""
    base = spec.get("priority_class")
    usable = [c for c in known if c.usable]
    is_open = overridable.permits(overridable.declared(spec), ("priority_class",))
    if base is None and not (is_open and usable):
        return None
    value = effective(spec, overrides) or ""
    return PriorityField(base=base, value=value, choices=usable, open=is_open)


def effective(spec: Mapping, overrides: Any) -> str | None:
    """The class a job of `spec` with these overrides (a merge patch) runs at."""
    if isinstance(overrides, dict) and "priority_class" in overrides:
        chosen = overrides["priority_class"]
        return chosen if isinstance(chosen, str) else None
    base = spec.get("priority_class")
    return base if isinstance(base, str) else None


def read(f: PriorityField, form: Mapping[str, Any], patch: dict | None) -> None:
    """The posted class into the fields' merge patch (only when it differs from the template's)."""
    if not f.open:
        return
    f.value = str(form.get(f.name) or "").strip()
    if patch is not None and (f.value or None) != f.base:
        patch["priority_class"] = f.value or None


def refusal(name: str, team: str, usable: list[PriorityClassOut]) -> str:
    """Why `name` cannot be used, with the classes the team may use (never the others)."""
    allowed = "; ".join(describe(c.name, usable) for c in usable)
    if not allowed:
        return f"{name!r} is not a priority class team {team} may use, and no class is open to it — " \
               "launch without a class, or ask an operator for one"
    return f"{name!r} is not a priority class team {team} may use — pick one of: {allowed}"


def check(spec: Mapping, overrides: Any, team: str, known: list[PriorityClassOut]) -> str | None:
    """The refusal for the class this launch would run at, or None when the team may use it."""
    name = effective(spec, overrides)
    if name is None:
        return None
    usable = [c for c in known if c.usable]
    if any(c.name == name for c in usable):
        return None
    return refusal(name, team, usable)


def names_by_value(known: Iterable[PriorityClassOut]) -> dict[int, str]:
    """A queue entry's priority named by the class(es) of that value: `batch`, `a / b`."""
    out: dict[int, list[str]] = {}
    for c in known:
        out.setdefault(c.value, []).append(c.name)
    return {v: " / ".join(sorted(names)) for v, names in out.items()}
