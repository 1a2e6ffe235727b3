"""Who may change what in a template when launching a job.

Members change a job through the template's parameters and the fields its
`overridable` list names; anything else is a 403 naming the field. Admins may
override anything, and the job's first event says what they changed beyond the
list. Environment variables that change how programs start stay as the template
set them unless an admin sent the overrides (service.jobspec.env_policy)."""
from __future__ import annotations

from typing import Any

from service import jobspec
from service.auth.service import Actor
from service.core.errors import Forbidden, Problem
from service.jobspec import overridable

SUBMITTED = "submitted"
MAX_LISTED = 20  # paths named in the event reason; the overrides themselves are stored with the job


def enforce(actor: Actor, template_name: str, template_version: int, template_spec: dict,
            overrides: Any) -> tuple[str, list[Problem]]:
    """Raise Forbidden (403) if the actor may not send these overrides; otherwise return
    the reason for the job's first event and the overrides' 422 problems, which the submit
    reports with every other (jobspec.build_from). A patch of the wrong shape is not
    walked here: build_from reports its shape."""
    _, usable = jobspec.patch_problems(overrides)
    if not overrides or not usable:
        return SUBMITTED, []
    # The list itself is nobody's to change (a 422 from build_from, for admins too): the
    # policy judges the rest of the patch.
    overrides = {k: v for k, v in overrides.items() if k not in overridable.NOT_A_PATH}
    if not overrides:
        return SUBMITTED, []
    admin = actor.can("admin")
    allowed = overridable.declared(template_spec)
    changed = overridable.changed_paths(template_spec, overrides)
    outside = [p for p in changed if not overridable.permits(allowed, p)]
    if outside and not admin:
        raise _forbidden(actor, template_name, template_version, template_spec, outside)
    if not admin:
        problems = [p.prefixed("overrides") for p in
                    jobspec.env_policy.startup_changes(template_spec, jobspec.merge_patch(template_spec, overrides))]
        if problems:   # refused to members wherever env is open: the 422 says why, not the 403 below
            return SUBMITTED, problems
        unlisted = overridable.env_outside(template_spec, allowed, changed)
        if unlisted:
            raise _unlisted_env(actor, template_name, template_version, unlisted)
    if not outside:
        return SUBMITTED, []
    named = ", ".join(overridable.text(p) for p in outside[:MAX_LISTED])
    more = f" and {len(outside) - MAX_LISTED} more" if len(outside) > MAX_LISTED else ""
    return f"{SUBMITTED}; admin override beyond the template's overridable fields: {named}{more}", []


def _unlisted_env(actor: Actor, name: str, version: int, unlisted: list) -> Forbidden:
    problems = [Problem(f"overrides.{overridable.text(p)}",
                        f"template {name!r} version {version} lets members change the environment variables it "
                        f"sets there, and the ones its overridable list names one by one; {p[-1]} is neither",
                        f"remove it, or ask an admin of team {actor.team} to add {overridable.text(p)} to the "
                        "template's overridable list") for p in unlisted]
    return Forbidden(f"{problems[0].field}: not an environment variable members may set in this template",
                     problems=problems)


def _forbidden(actor: Actor, name: str, version: int, spec: dict, outside: list) -> Forbidden:
    open_to_members = ", ".join(spec.get("overridable") or []) or "none"
    fix = (f"remove it (this template lets members change: {open_to_members}, and its parameters); "
           f"an admin of team {actor.team} may launch the job with it, or add it to the template's "
           "overridable list")
    problems = [Problem(f"overrides.{overridable.text(p)}",
                        f"template {name!r} version {version} does not let members change it", fix)
                for p in outside]
    first = problems[0].field
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return Forbidden(f"{first}: only an admin of team {actor.team} may change it{more}; your token's role is "
                     f"{actor.role}", problems=problems)
