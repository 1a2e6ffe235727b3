"""Declared template parameters, the values a job gives them, and `${name}`
substitution into the container's command, args and env and the output dir."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from service.core.errors import Problem
from service.jobspec.spec import Parameter

# `$${x}` is the escape for a literal `${x}` (as in shell-style templates).
_REF = re.compile(r"\$(\$?)\{([^}]*)\}")
Value = int | float | str | bool


def check_declarations(params: list[Parameter]) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, p in enumerate(params):
        where = f"parameters[{i}]"
        if p.name in seen:
            problems.append(Problem(f"{where}.name", f"parameter {p.name!r} is declared twice",
                                    "give each parameter a unique name"))
        seen.add(p.name)
        if p.minimum is not None and p.maximum is not None and p.minimum > p.maximum:
            problems.append(Problem(where, f"minimum {p.minimum} is above maximum {p.maximum}",
                                    "swap or correct the bounds"))
        if (p.minimum is not None or p.maximum is not None) and p.type not in ("int", "float"):
            problems.append(Problem(where, f"bounds only apply to int and float, not {p.type}",
                                    "remove minimum/maximum or change the type"))
        if p.default is not None:
            problem = _coerce(p, p.default)
            if isinstance(problem, Problem):
                problems.append(problem.prefixed(f"{where}.default") if problem.field
                                else Problem(f"{where}.default", problem.message, problem.fix))
    return problems


def resolve(params: list[Parameter], values: dict[str, Any]) -> tuple[dict[str, Value], list[Problem]]:
    """Values for every declared parameter: the job's, else the default."""
    declared = {p.name: p for p in params}
    problems: list[Problem] = []
    for name in values:
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            problems.append(Problem(f"parameters.{name}", "unknown parameter",
                                    f"remove it; this template declares: {known}"))
    resolved: dict[str, Value] = {}
    for p in params:
        if p.name in values:
            value = _coerce(p, values[p.name])
            if isinstance(value, Problem):
                problems.append(Problem(f"parameters.{p.name}", value.message, value.fix))
                continue
            resolved[p.name] = value
        elif p.default is not None:
            resolved[p.name] = p.default
        else:
            problems.append(Problem(f"parameters.{p.name}", "required parameter has no value",
                                    f"pass parameters.{p.name} ({p.type})"))
    return resolved, problems


def _coerce(p: Parameter, value: Any) -> Value | Problem:
    """The value as the parameter's type, or why it cannot be (a Problem with no field)."""
    # bool is a subclass of int in Python: refuse it where a number is wanted.
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "string": isinstance(value, str),
        "bool": isinstance(value, bool),
    }[p.type]
    if not ok:
        return Problem("", f"expected {p.type}, got {type(value).__name__} {value!r}",
                      f"pass a JSON {'number' if p.type in ('int', 'float') else p.type}")
    if isinstance(value, float) and not math.isfinite(value):
        return Problem("", f"{value} is not a number a job can use", "pass a finite number")
    if p.type == "float":
        try:
            value = float(value)
        except OverflowError:
            return Problem("", "too large for a float", "pass a number below 1.8e308")
    numeric = p.type in ("int", "float")  # bounds on other types are refused in check_declarations
    if numeric and p.minimum is not None and value < p.minimum:
        return Problem("", f"{value} is below the minimum {_num(p.minimum)}",
                      f"use a value between {_num(p.minimum)} and {_num(p.maximum)}")
    if numeric and p.maximum is not None and value > p.maximum:
        return Problem("", f"{value} is above the maximum {_num(p.maximum)}",
                      f"use a value between {_num(p.minimum)} and {_num(p.maximum)}")
    if p.choices is not None and value not in p.choices:
        return Problem("", f"{value!r} is not one of {p.choices}", "pick one of the choices")
    if isinstance(value, str) and len(value) > 4096:
        return Problem("", "string longer than 4096 characters", "shorten it")
    return value


def _num(x: float | None) -> str:
    if x is None:
        return "unbounded"
    return str(int(x)) if float(x).is_integer() else str(x)


def references(text: str) -> set[str]:
    return {m.group(2) for m in _REF.finditer(text) if not m.group(1)}


def substitute(text: str, values: Mapping[str, Value]) -> str:
    def repl(m: re.Match) -> str:
        if m.group(1):
            return "${" + m.group(2) + "}"
        value = values[m.group(2)]
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    return _REF.sub(repl, text)


def check_references(strings: list[tuple[str, str]], params: list[Parameter]) -> list[Problem]:
    """Every `${name}` in (field, text) pairs must name a declared parameter."""
    declared = {p.name for p in params}
    problems = []
    for where, text in strings:
        for name in sorted(references(text) - declared):
            problems.append(Problem(where, f"references undeclared parameter ${{{name}}}",
                                    f"declare a parameter named {name!r} or write $${{{name}}} for a literal"))
    return problems
