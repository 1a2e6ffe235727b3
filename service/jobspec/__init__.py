"""The compiler: template spec + parameters + overrides -> CompiledJob.

Both backends consume the CompiledJob, so the worker-pool rules live here only."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from service.core.errors import Invalid, Problem
from service.jobspec import env_policy, overridable, partial
from service.jobspec import parameters as params_mod
from service.jobspec.compile import CompiledJob, Replica, compile_spec
from service.jobspec.merge_patch import merge_patch
from service.jobspec.spec import JobSpec, Parameter
from service.jobspec.trial import TRIAL_ENV, Trial
from service.jobspec.validate import MAX_LABELS, check_display_name, check_labels, check_spec

__all__ = ["CompiledJob", "Prepared", "Replica", "JobSpec", "Parameter", "Trial", "build", "build_from", "check_patch",
           "check_template", "job_labels", "name_and_label_problems", "patch_problems", "prepare",
           "env_policy", "merge_patch", "overridable", "pydantic_problems"]


MAX_OVERRIDE_DEPTH = 16


def _depth(value: Any) -> int:
    """Nesting depth, without recursion (hostile input may be thousands deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        items: Iterable[Any]
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, d)
        if deepest > MAX_OVERRIDE_DEPTH:
            return deepest
        stack.extend((child, d + 1) for child in items)
    return deepest


def pydantic_problems(err: ValidationError, prefix: str) -> list[Problem]:
    out = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"])
        where = f"{prefix}.{loc}" if loc else prefix
        fix = "remove it" if e["type"] == "extra_forbidden" else ""
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        out.append(Problem(where, msg, fix))
    return out


def _string_fields(spec: JobSpec) -> list[tuple[str, str]]:
    """(field, text) for every string that `${param}` may appear in."""
    out: list[tuple[str, str]] = []
    c = spec.container
    out += [(f"container.command[{i}]", s) for i, s in enumerate(c.command)]
    out += [(f"container.args[{i}]", s) for i, s in enumerate(c.args)]
    out += [(f"container.env.{k}", v) for k, v in c.env.items()]
    out.append(("container.image_uri", c.image_uri))
    for name in ("chief", "workers", "parameter_servers", "evaluator"):
        role = getattr(spec, name)
        if role is None or role.container is None:
            continue
        o = role.container
        out += [(f"{name}.container.command[{i}]", s) for i, s in enumerate(o.command or [])]
        out += [(f"{name}.container.args[{i}]", s) for i, s in enumerate(o.args or [])]
        out += [(f"{name}.container.env.{k}", v) for k, v in o.env.items()]
        if o.image_uri:
            out.append((f"{name}.container.image_uri", o.image_uri))
    if spec.base_output_directory:
        out.append(("base_output_directory", spec.base_output_directory))
    if spec.experiment_run:
        out.append(("experiment_run", spec.experiment_run))
    return out


def _substituted(spec: JobSpec, values: Mapping[str, params_mod.Value]) -> JobSpec:
    data = spec.model_dump()
    sub = lambda s: params_mod.substitute(s, values)  # noqa: E731

    def fix_container(c: dict | None) -> None:
        if not c:
            return
        for key in ("command", "args"):
            if c.get(key) is not None:
                c[key] = [sub(s) for s in c[key]]
        c["env"] = {k: sub(v) for k, v in (c.get("env") or {}).items()}
        if c.get("image_uri"):
            c["image_uri"] = sub(c["image_uri"])

    fix_container(data["container"])
    for name in ("chief", "workers", "parameter_servers", "evaluator"):
        if data.get(name):
            fix_container(data[name].get("container"))
    if data.get("base_output_directory"):
        data["base_output_directory"] = sub(data["base_output_directory"])
    if data.get("experiment_run"):
        data["experiment_run"] = sub(data["experiment_run"])
    return JobSpec.model_validate(data)


def check_template(spec: dict, declared: list[dict]) -> tuple[JobSpec, list[Parameter]]:
    """Validate a template as stored: a sound spec, sound parameters, and no
    reference to an undeclared parameter. Raises Invalid with every problem."""
    problems: list[Problem] = []
    parsed_params: list[Parameter] = []
    for i, p in enumerate(declared):
        try:
            parsed_params.append(Parameter.model_validate(p))
        except ValidationError as e:
            problems += pydantic_problems(e, f"parameters[{i}]")
    try:
        parsed = JobSpec.model_validate(spec)
    except ValidationError as e:
        raise Invalid.of(problems + pydantic_problems(e, "spec")) from None
    problems += params_mod.check_declarations(parsed_params)
    problems += [p.prefixed("spec") for p in params_mod.check_references(_string_fields(parsed), parsed_params)]
    problems += [p.prefixed("spec") for p in check_spec(parsed)]
    problems += [p.prefixed("spec") for p in overridable.check_declared(parsed.overridable)]
    problems += [p.prefixed("spec") for p in env_policy.check_template_env(spec, parsed_params)]
    if problems:
        raise Invalid.of(problems)
    return parsed, parsed_params


def patch_problems(overrides: Any) -> tuple[list[Problem], bool]:
    """What is wrong with a merge patch's shape, and whether it can be applied anyway
    (False: too deep to walk, or not an object, so no merged spec can be built from it)."""
    if _depth(overrides) > MAX_OVERRIDE_DEPTH:
        return [Problem("overrides", f"nested deeper than {MAX_OVERRIDE_DEPTH} levels",
                        "a template spec is a few levels deep; send only the keys you change")], False
    if overrides is not None and not isinstance(overrides, dict):
        return [Problem("overrides", "a merge patch over the template spec must be a JSON object",
                        'send e.g. {"workers": {"replica_count": 4}}; null removes a key')], False
    if isinstance(overrides, dict) and "overridable" in overrides:
        return [Problem("overrides.overridable", "the template's list of overridable fields is its "
                        "admin's policy; a job cannot change it",
                        "remove it; an admin can PUT a new template version")], True
    return [], True


def check_patch(overrides: Any) -> None:
    """The shape every merge patch must have before anything walks it."""
    problems, _ = patch_problems(overrides)
    if problems:
        raise Invalid.of(problems)


def _declared_params(declared: list[dict]) -> list[Parameter]:
    try:
        return [Parameter.model_validate(p) for p in declared]
    except ValidationError as e:
        raise Invalid.of(_stale_params(e)) from None


def _stale_params(e: ValidationError) -> list[Problem]:
    # Stored before a rule tightened (e.g. a NaN bound on SQLite): the template must be fixed.
    return [Problem("template", "the template's stored parameters are no longer valid: "
                    + pydantic_problems(e, "parameters")[0].message,
                    "an admin must PUT a corrected version of the template")]


@dataclass(frozen=True)
class Prepared:
    """A template version parsed and checked once, for every job launched from it.

    Versions are immutable, so this is cached by (template id, version)
    (service.templates.cache). Everything here is shared between requests and
    threads: read it, never change it. A job without overrides uses `parsed` as is;
    one with overrides merges them over `spec` and validates the result itself."""

    spec: dict                                  # the spec as stored
    parsed: JobSpec | None                      # `spec` validated; None: see spec_problems
    spec_problems: tuple[Problem, ...]          # why `spec` is no longer a valid JobSpec
    params: tuple[Parameter, ...] | None        # None: see params_problems
    params_problems: tuple[Problem, ...]        # why the stored parameters are no longer valid
    reserved: tuple[Problem, ...]               # reserved env names in `spec`
    references: tuple[Problem, ...]             # `${name}`s in `spec` that no parameter declares


def prepare(template_spec: dict, declared: list[dict]) -> Prepared:
    parsed: JobSpec | None
    params: tuple[Parameter, ...] | None
    spec_problems: tuple[Problem, ...]
    params_problems: tuple[Problem, ...]
    try:
        parsed, spec_problems = JobSpec.model_validate(template_spec), ()
    except ValidationError as e:
        parsed, spec_problems = None, tuple(pydantic_problems(e, "spec"))
    try:
        params, params_problems = tuple(Parameter.model_validate(p) for p in declared), ()
    except ValidationError as e:
        params, params_problems = None, tuple(_stale_params(e))
    reserved = tuple(p.prefixed("spec") for p in env_policy.reserved_problems(template_spec))
    references: tuple[Problem, ...] = ()
    if parsed is not None and params is not None:
        references = tuple(p.prefixed("spec")
                           for p in params_mod.check_references(_string_fields(parsed), list(params)))
    return Prepared(template_spec, parsed, spec_problems, params, params_problems, reserved, references)


def build(template_spec: dict, declared: list[dict], values: Mapping[str, Any] | None,
          overrides: Any, *, display_name: str, labels: Mapping[str, str],
          reserved_labels: Mapping[str, str] | None = None, trial: Trial | None = None) -> tuple[JobSpec, CompiledJob]:
    """Apply overrides (JSON merge patch) and parameter values, validate, compile."""
    return build_from(prepare(template_spec, declared), values, overrides, display_name=display_name,
                      labels=labels, reserved_labels=reserved_labels, trial=trial)


def build_from(template: Prepared, values: Mapping[str, Any] | None, overrides: Any, *, display_name: str,
               labels: Mapping[str, str],
               reserved_labels: Mapping[str, str] | None = None,
               trial: Trial | None = None) -> tuple[JobSpec, CompiledJob]:
    """`build` for a prepared template: what depends on the template alone was worked out
    once, in `prepare`. `trial`: the sweep trial this job runs (its id in every replica's
    env and labels).

    Raises Invalid with every problem at once: the overrides' shape, the merged spec's
    schema, the parameters, the name and labels, and the spec's rules. Each check runs
    unless it needs what another found broken; then (if that is not already reported on
    the same field) a problem says what was not checked and what must be fixed first."""
    spec, unknown, merged, problems, usable = _merged(template, overrides)
    if template.params is None:
        problems += template.params_problems
    if merged is not None:
        problems += [p.prefixed("spec") for p in env_policy.reserved_problems(merged)]
    elif usable:
        problems += template.reserved
    resolved, unresolved, param_problems = _parameters(template, spec, merged, values)
    problems += param_problems
    problems += name_and_label_problems(display_name, labels)

    if spec is None:
        if usable:
            problems.append(Problem("spec", "the spec's rules (pools, strategy, machines) were not checked: "
                                    "its schema problems must be fixed first", "fix them and submit again"))
        raise Invalid.of(problems)
    # The values go into the spec's strings only when every one is sound; until then the
    # rules that read substituted text wait for the parameters (validate.check_spec).
    if unresolved:
        unknown |= {"parameters"}
    else:
        try:
            spec = _substituted(spec, resolved)
        except ValidationError as e:  # e.g. a parameter's value made an argument too long
            problems += pydantic_problems(e, "spec")
            unknown |= {"parameters"}
    problems += [p.prefixed("spec") for p in check_spec(spec, unknown)]
    if problems:
        raise Invalid.of(problems)
    all_labels = job_labels(spec.labels, labels, reserved_labels, trial)
    if len(all_labels) > MAX_LABELS:
        raise Invalid.of([Problem("labels", f"{len(all_labels)} labels with the template's; Google allows 64",
                                  "drop some labels")])
    return spec, compile_spec(spec, display_name=display_name, labels=all_labels,
                              service_env={TRIAL_ENV: trial.trial_id} if trial else None)


def name_and_label_problems(display_name: str, labels: Mapping[str, str]) -> list[Problem]:
    """build_from's checks of what differs between the jobs of one compile (jobs.compile_reuse)."""
    return check_display_name(display_name) + check_labels("labels", dict(labels))


def job_labels(spec_labels: Mapping[str, str], labels: Mapping[str, str], reserved_labels: Mapping[str, str] | None,
               trial: Trial | None) -> dict[str, str]:
    """A job's CustomJob labels: the template's, the job's, trainjobs' own, a sweep trial's."""
    return {**spec_labels, **labels, **(reserved_labels or {}), **(trial.labels() if trial else {})}


def _merged(template: Prepared, overrides: Any) -> tuple[JobSpec | None, frozenset[str], dict | None,
                                                         list[Problem], bool]:
    """The template spec with the overrides applied, checked against the schema: (the spec,
    the fields whose checks must wait, the merged dict when overrides changed it, the
    problems, whether the overrides could be applied at all)."""
    problems, usable = patch_problems(overrides)
    if not usable:
        problems.append(Problem("spec", "the template spec with the overrides was not checked: the overrides "
                                "must be a JSON object first", "fix the overrides and submit again"))
        return None, frozenset(), None, problems, usable
    if overrides or template.parsed is None:
        merged = merge_patch(template.spec, overrides) if overrides else template.spec
        part = partial.validated(merged, lambda e: pydantic_problems(e, "spec"))
        problems += part.problems if overrides else list(template.spec_problems)
        return part.spec, part.unknown, merged, problems, usable
    return template.parsed, frozenset(), None, problems, usable


def _parameters(template: Prepared, spec: JobSpec | None, merged: dict | None,
                values: Mapping[str, Any] | None) -> tuple[dict[str, params_mod.Value], bool, list[Problem]]:
    """The parameters' values resolved against their declarations, and the references to
    them checked: (the values, whether any is unresolved, the problems). Declarations that
    are themselves broken (template.params_problems, the caller's) leave them all unresolved."""
    if template.params is None:
        return {}, True, []
    declared_params = list(template.params)
    resolved, param_problems = params_mod.resolve(declared_params, dict(values or {}))
    if spec is not None and merged is not None:
        reference_problems = [p.prefixed("spec") for p in params_mod.check_references(_string_fields(spec),
                                                                                      declared_params)]
    else:
        reference_problems = list(template.references) if spec is not None else []
    return resolved, bool(param_problems or reference_problems), param_problems + reference_problems
