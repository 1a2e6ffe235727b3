"""The launch form, generated from a template version's typed parameters, and the
way back: posted strings -> a JobCreate body, or the problems to show beside
each field. The job service checks everything again (bounds, choices, the
overrides); this only turns form text into typed JSON values."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from service.core.errors import Problem
from service.jobs.schemas import JobCreate
from service.jobs.submitter import is_idempotency_key  # the API's rule: the form's hidden key fits it
from service.jobspec import MAX_OVERRIDE_DEPTH, pydantic_problems
from service.jobspec import _depth as jobspec_depth
from service.ui import launch_settings
from service.ui import priority as priority_classes
from service.ui.launch_settings import SettingField
from service.ui.priority import PriorityField

LABEL_LINE = re.compile(r"^\s*([^=\s]+)\s*=\s*(\S*)\s*$")


@dataclass
class ParamField:
    name: str
    type: str
    description: str
    required: bool
    value: str = ""
    checked: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: list[str] | None = None
    default: Any = None
    error: str | None = None

    @property
    def input_id(self) -> str:
        return f"param-{self.name}"

    @property
    def step(self) -> str:
        return "1" if self.type == "int" else "any"

    @property
    def bounds(self) -> str:
        lo = "" if self.minimum is None else _num(self.minimum)
        hi = "" if self.maximum is None else _num(self.maximum)
        if lo and hi:
            return f"{lo} to {hi}"
        return f"at least {lo}" if lo else (f"at most {hi}" if hi else "")


@dataclass
class LaunchForm:
    params: list[ParamField]
    backend: str
    display_name: str = ""
    labels: str = ""
    overrides: str = ""
    idempotency_key: str = ""
    settings: list[SettingField] = field(default_factory=list)  # what the template lets members change
    priority: PriorityField | None = None                     # the priority class (a picker where open)
    errors: dict[str, str] = field(default_factory=dict)     # form field -> message
    other_errors: list[str] = field(default_factory=list)    # problems no field owns

    @property
    def problems(self) -> list[tuple[str | None, str, str]]:
        """(field id to link, field's name, message) of every problem, in the form's order: the
        box at the top counts and lists them (issue 37), each also shown beside its field."""
        out: list[tuple[str | None, str, str]] = [(p.input_id, p.name, p.error) for p in self.params if p.error]
        for name in ("backend", "display_name", "labels"):
            if name in self.errors:
                out.append((name, name.replace("_", " "), self.errors[name]))
        if self.priority is not None and self.priority.error:
            out.append((self.priority.input_id, "priority class", self.priority.error))
        out += [(f.input_id, f"{f.role.replace('_', ' ')}: {f.key.replace('_', ' ')}", f.error)
                for f in self.settings if f.error]
        if "overrides" in self.errors:
            out.append(("overrides", "overrides", self.errors["overrides"]))
        return out + [(None, "", e) for e in self.other_errors]

    @property
    def has_errors(self) -> bool:
        return bool(self.errors or self.other_errors or any(p.error for p in self.params)
                    or any(f.error for f in self.settings) or (self.priority is not None and bool(self.priority.error)))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return _num(value) if isinstance(value, float) else str(value)


def new_form(declared: list[dict], values: Mapping[str, Any], *, backend: str, display_name: str = "",
             labels: Mapping[str, str] | None = None, overrides: Any = None, idempotency_key: str = "",
             settings: Sequence[SettingField] = (), priority: PriorityField | None = None) -> LaunchForm:
    """A form filled with `values` over the parameters' defaults."""
    params = []
    for p in declared:
        value = values.get(p["name"], p.get("default"))
        choices = [_text(c) for c in p["choices"]] if p.get("choices") else None
        params.append(ParamField(name=p["name"], type=p["type"], description=p.get("description", ""),
                                 required=p.get("default") is None, value=_text(value), checked=value is True,
                                 minimum=p.get("minimum"), maximum=p.get("maximum"), choices=choices,
                                 default=p.get("default")))
    return LaunchForm(params, backend, display_name,
                      "\n".join(f"{k}={v}" for k, v in (labels or {}).items()),
                      json.dumps(overrides, indent=2) if overrides not in (None, {}) else "", idempotency_key,
                      settings=list(settings), priority=priority)


def _lines(value: Any) -> str:
    """A text box's text with the browser's CRLF line breaks (HTML forms send them) as LF, once:
    a CR left in would be shown back as `\x0d` (pages show control characters) and grow with
    every preview or refusal (issue 37)."""
    return str(value or "").replace("\r\n", "\n").replace("\r", "\n")


def _typed(p: ParamField, raw: str, declared: dict) -> tuple[Any, str | None]:
    if p.choices is not None:
        for choice in declared["choices"]:
            if _text(choice) == raw:
                return choice, None
        return None, f"pick one of {', '.join(p.choices)}"
    if p.type == "string":
        return raw, None
    raw = raw.strip()
    if p.type == "int":
        try:
            return int(raw), None
        except ValueError:
            return None, "a whole number, e.g. 3"
    try:
        value = float(raw)
    except ValueError:
        return None, "a number, e.g. 0.01"
    return (value, None) if math.isfinite(value) else (None, "a finite number")


def read_form(declared: list[dict], form: Mapping[str, Any], *, backend: str,
              settings: Sequence[SettingField] = (), priority: PriorityField | None = None) -> tuple[LaunchForm, dict]:
    """The form as posted (to show again) and the JobCreate body fields of what could be read
    (lf.has_errors: some could not; the service still checks the rest, so every problem shows
    at once). Overrides that are not JSON stay text: the service then says what it could not check.
    The settings fields (replica counts, machines) are a patch the advanced JSON goes over.
    Over 60 lines on purpose: one pass over the form, each field's error kept beside its value."""
    lf = new_form(declared, {}, backend=str(form.get("backend") or backend), settings=settings, priority=priority)
    from_fields = launch_settings.read(lf.settings, form)
    if lf.priority is not None:
        priority_classes.read(lf.priority, form, from_fields)
    lf.display_name = str(form.get("display_name") or "")
    lf.labels = _lines(form.get("labels"))
    lf.overrides = _lines(form.get("overrides"))
    lf.idempotency_key = str(form.get("idempotency_key") or "")
    by_name = {p["name"]: p for p in declared}
    values: dict[str, Any] = {}
    for p in lf.params:
        key = f"param.{p.name}"
        if p.type == "bool" and p.choices is None:
            p.checked = form.get(key) == "true"
            p.value = "true" if p.checked else "false"
            values[p.name] = p.checked
            continue
        raw = str(form.get(key) or "")
        p.value = raw
        if raw.strip() == "" and p.type != "string":
            # The form shows every default filled in: a blank field was emptied, and taking the
            # default silently would launch what the user did not see (issue 25).
            p.error = "required" if p.required else f"enter a value (the default is {_text(p.default)})"
            continue
        value, error = _typed(p, raw, by_name[p.name])
        if error:
            p.error = error
        else:
            values[p.name] = value

    labels: dict[str, str] = {}
    for n, line in enumerate(lf.labels.splitlines(), 1):
        if not line.strip():
            continue
        m = LABEL_LINE.match(line)
        if not m:
            lf.errors["labels"] = f"line {n}: write key=value, one label a line"
            break
        labels[m.group(1)] = m.group(2)

    if lf.idempotency_key and not is_idempotency_key(lf.idempotency_key):
        lf.other_errors.append("This form's key (idempotency_key) is not one this page made: reload the page")

    overrides = None
    if lf.overrides.strip():
        try:
            overrides = json.loads(lf.overrides)
        except ValueError as e:
            lf.errors["overrides"] = f"not valid JSON: {e}"
        except RecursionError:  # json's decoder recurses per level: a few thousand [ exhaust it
            lf.errors["overrides"] = f"nested too deeply; overrides may be at most {MAX_OVERRIDE_DEPTH} levels deep"
        else:
            if jobspec_depth(overrides) > MAX_OVERRIDE_DEPTH:
                lf.errors["overrides"] = f"nested deeper than {MAX_OVERRIDE_DEPTH} levels"
    if "overrides" in lf.errors:
        overrides = lf.overrides
    elif from_fields:
        overrides = launch_settings.combine(from_fields, overrides)
    body = {"parameters": values, "labels": labels, "overrides": overrides, "backend": lf.backend or None}  # None: any
    if lf.display_name.strip():
        body["display_name"] = lf.display_name.strip()
    return lf, body


def job_create(template: str, version: int, body: dict, lf: LaunchForm) -> JobCreate | None:
    try:
        return JobCreate.model_validate({"template": template, "template_version": version, **body})
    except ValidationError as e:
        show_problems(lf, pydantic_problems(e, ""))
        return None


def show_more_problems(lf: LaunchForm, problems: list[Problem]) -> None:
    """The service's problems with a form that has problems of its own: those of fields the
    form flagged already are its echo (a parameter left out as unreadable is "required") and
    are left out; the rest shows beside the form's."""
    flagged = {f"parameters.{p.name}" for p in lf.params if p.error} | set(lf.errors)
    if lf.priority is not None and lf.priority.error:   # the form's wording: the classes the team may use
        flagged |= {"priority_class", "overrides.priority_class"}
    show_problems(lf, [p for p in problems if p.field not in flagged
                       and p.field.partition(".")[0] not in flagged - {"overrides"}])


def show_problems(lf: LaunchForm, problems: list[Problem]) -> None:
    """Each problem beside the field it names (parameters.epochs -> the epochs input)."""
    params = {p.name: p for p in lf.params}
    settings = {f"{f.role}.{f.key}": f for f in lf.settings}

    def add(field_name: str, text: str) -> None:
        lf.errors[field_name] = f"{lf.errors[field_name]}; {text}" if field_name in lf.errors else text

    for problem in problems:
        where = problem.field.lstrip(".")
        text = problem.message + (f" — {problem.fix}" if problem.fix else "")
        head, _, rest = where.partition(".")
        if head == "parameters" and rest.split(".")[0] in params:
            params[rest.split(".")[0]].error = text
        elif head in ("labels", "display_name", "backend"):
            add(head, f"{rest}: {text}" if rest else text)
        elif lf.priority is not None and "priority_class" in (head, rest):
            lf.priority.error = text
        elif head in ("overrides", "spec") and rest in settings and not lf.overrides.strip():
            settings[rest].error = text  # the field made this override (no JSON could have)
        elif head in ("overrides", "spec"):
            add("overrides", f"{where}: {text}")
        else:
            lf.other_errors.append(f"{where}: {text}" if where else text)
