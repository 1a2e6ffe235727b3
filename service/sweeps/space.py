"""A sweep's search space, checked against the template's declared parameters, and the
trials it yields. Pure: no database.

grid:   every combination of the listed values (bool parameters and parameters with
        declared choices may list none: all of them are taken), in the order the
        parameters are given, the last one changing fastest.
random: `trial_count` draws from random.Random(seed): a listed value picked uniformly,
        else a number in [min, max] (by default the declared bounds), uniform or, with
        scale "log", uniform in log space; a declared choice, or true/false, when nothing
        is listed. The same seed and space give the same trials."""
from __future__ import annotations

import itertools
import math
import random
from typing import Any

from service.core.errors import Invalid, Problem
from service.jobspec import parameters as params_mod
from service.jobspec.spec import Parameter
from service.sweeps.schemas import ParameterSpace, SweepCreate

Value = int | float | str | bool


def _declared_text(p: Parameter) -> str:
    if p.choices is not None:
        return f"{p.type}, one of {p.choices}"
    if p.type == "bool":
        return "bool"
    if p.type in ("int", "float"):
        lo = _num(p.minimum) if p.minimum is not None else "unbounded"
        hi = _num(p.maximum) if p.maximum is not None else "unbounded"
        return f"{p.type}, declared from {lo} to {hi}"
    return p.type


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _value_problem(p: Parameter, value: Any, where: str) -> Problem | None:
    _, problems = params_mod.resolve([p], {p.name: value})
    if not problems:
        return None
    return Problem(where, f"{problems[0].message} (parameter {p.name!r}: {_declared_text(p)})",
                   problems[0].fix)


def check(body: SweepCreate, declared: list[Parameter], *, max_trials: int) -> list[Problem]:
    """Every problem of the space itself: unknown names, values or ranges outside what the
    template declares, options that do not fit the algorithm, too many trials."""
    by_name = {p.name: p for p in declared}
    known = ", ".join(sorted(by_name)) or "none"
    problems: list[Problem] = []
    for name in body.parameters.keys() & body.fixed_parameters.keys():
        problems.append(Problem(f"fixed_parameters.{name}", "is also in the search space",
                                "keep it in one of parameters and fixed_parameters"))
    for name, space in body.parameters.items():
        where = f"parameters.{name}"
        p = by_name.get(name)
        if p is None:
            problems.append(Problem(where, "the template declares no such parameter",
                                    f"search over the template's parameters: {known}"))
            continue
        problems += _check_one(body.algorithm, p, space, where, max_trials)
    if body.algorithm == "grid":
        for field in ("trial_count", "seed"):
            if getattr(body, field) is not None:
                problems.append(Problem(field, "only a random search takes it",
                                        "remove it: a grid runs every combination once"))
    elif body.trial_count is None:
        problems.append(Problem("trial_count", "a random search needs a number of trials",
                                f"pass trial_count (1 to {max_trials})"))
    elif body.trial_count > max_trials:
        problems.append(Problem("trial_count", f"{body.trial_count} trials; a sweep may have at most {max_trials}",
                                f"ask for {max_trials} or fewer (the service's TRAINJOBS_SWEEP_MAX_TRIALS)"))
    if not problems and body.algorithm == "grid":
        count = grid_size(body, by_name)
        if count > max_trials:
            problems.append(Problem("parameters", f"the grid has {count} combinations; a sweep may have at most "
                                    f"{max_trials}", "list fewer values, or run a random search over the "
                                    "same space (TRAINJOBS_SWEEP_MAX_TRIALS sets the limit)"))
    return problems


def _check_one(algorithm: str, p: Parameter, space: ParameterSpace, where: str, max_trials: int) -> list[Problem]:
    problems: list[Problem] = []
    ranged = space.min is not None or space.max is not None or space.scale != "linear"
    if space.values is not None:
        if ranged:
            problems.append(Problem(where, "gives both values and a range", "give one of values and min/max"))
        if len(space.values) > max_trials:
            problems.append(Problem(f"{where}.values", f"{len(space.values)} values; at most {max_trials}",
                                    "list fewer values (TRAINJOBS_SWEEP_MAX_TRIALS)"))
        for i, value in enumerate(space.values[:max_trials]):
            problem = _value_problem(p, value, f"{where}.values[{i}]")
            if problem:
                problems.append(problem)
        return problems
    if algorithm == "grid":
        if ranged:
            problems.append(Problem(where, "a grid takes listed values, not a range",
                                    "list the values to try, or use algorithm random"))
        elif p.choices is None and p.type != "bool":
            problems.append(Problem(where, f"no values listed (parameter {p.name!r}: {_declared_text(p)})",
                                    "list the values to try in values"))
        return problems
    if not ranged and (p.choices is not None or p.type == "bool"):
        return problems   # drawn from the declared choices
    if p.type not in ("int", "float"):
        return [Problem(where, f"a range needs an int or float parameter (parameter {p.name!r}: "
                        f"{_declared_text(p)})", "list the values to try in values")]
    lo = space.min if space.min is not None else p.minimum
    hi = space.max if space.max is not None else p.maximum
    for bound, end in (("min", lo), ("max", hi)):
        if end is None:
            problems.append(Problem(f"{where}.{bound}", f"parameter {p.name!r} declares no {bound}imum to "
                                    "default to", f"give {bound} for the range"))
        else:
            problem = _value_problem(p, int(end) if p.type == "int" and float(end).is_integer() else end,
                                     f"{where}.{bound}")
            if problem:
                problems.append(problem)
    if problems or lo is None or hi is None:   # a missing bound is a problem above
        return problems
    if lo > hi:
        problems.append(Problem(where, f"min {_num(lo)} is above max {_num(hi)}", "swap or correct them"))
    if p.type == "int" and math.ceil(lo) > math.floor(hi):
        problems.append(Problem(where, f"no whole number between {_num(lo)} and {_num(hi)}", "widen the range"))
    if space.scale == "log" and lo <= 0:
        problems.append(Problem(f"{where}.min", f"a log scale needs a positive range, not from {_num(lo)}",
                                "start the range above 0, or use scale linear"))
    return problems


def _choices(p: Parameter, space: ParameterSpace) -> list[Value] | None:
    if space.values is not None:
        return list(space.values)
    if space.min is None and space.max is None and space.scale == "linear":
        if p.choices is not None:
            return list(p.choices)
        if p.type == "bool":
            return [False, True]
    return None


def grid_size(body: SweepCreate, by_name: dict[str, Parameter]) -> int:
    return math.prod(len(_choices(by_name[n], s) or ()) for n, s in body.parameters.items())


def plan(body: SweepCreate, declared: list[Parameter], *, max_trials: int, seed: int | None) -> list[dict[str, Value]]:
    """Each trial's parameter values (fixed ones included), trial 1 first. Raises Invalid."""
    problems = check(body, declared, max_trials=max_trials)
    if problems:
        raise Invalid.of(problems)
    by_name = {p.name: p for p in declared}
    names = list(body.parameters)
    if body.algorithm == "grid":
        lists = [_grid_values(by_name[n], body.parameters[n]) for n in names]
        trials = [dict(zip(names, combo, strict=False)) for combo in itertools.product(*lists)]
    else:
        if body.trial_count is None:
            raise AssertionError("check() lets a random search through only with a trial_count")
        rng = random.Random(seed)
        trials = [{n: _draw(rng, by_name[n], body.parameters[n]) for n in names} for _ in range(body.trial_count)]
    return [{**body.fixed_parameters, **t} for t in trials]


def _grid_values(p: Parameter, space: ParameterSpace) -> list[Value]:
    choices = _choices(p, space)
    if choices is None:
        raise AssertionError(f"check() lets a grid through only with values for {p.name!r}")
    return choices


def _draw(rng: random.Random, p: Parameter, space: ParameterSpace) -> Value:
    choices = _choices(p, space)
    if choices is not None:
        return choices[rng.randrange(len(choices))]
    lo = space.min if space.min is not None else p.minimum
    hi = space.max if space.max is not None else p.maximum
    if lo is None or hi is None:
        raise AssertionError(f"check() lets a range through only with both bounds ({p.name!r})")
    if p.type == "int":
        lo_i, hi_i = math.ceil(lo), math.floor(hi)
        if space.scale == "log":
            whole = round(math.exp(rng.uniform(math.log(lo_i), math.log(hi_i))))
        else:
            whole = rng.randint(lo_i, hi_i)
        return min(max(whole, lo_i), hi_i)
    if space.scale == "log":
        value = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    else:
        value = rng.uniform(lo, hi)
    return min(max(value, lo), hi)   # exp(log(x)) may land a hair outside
