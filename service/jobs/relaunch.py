"""POST /v1/jobs/{id}/relaunch: a new job from what an earlier one was launched with.

The earlier job's template version, parameters, overrides, backend, labels and display
name, changed by the request, make a JobCreate that goes through JobSubmitter.relaunch
like any submit: the caller's role decides which overrides are allowed (a member cannot relaunch
an admin's job with overrides beyond the template's `overridable` list), the template
must not be archived, and the compiled job is checked again."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from service import jobspec
from service.core.errors import Invalid
from service.jobs.schemas import JobCreate, JobRelaunch


def compose_patches(first: Any, second: Any) -> Any:
    """One merge patch that does what applying `first`, then `second`, does (RFC 7396):
    `second`'s nulls stay nulls (they remove), its objects merge into `first`'s."""
    if not isinstance(second, dict):
        return first if second is None else second
    out = dict(first) if isinstance(first, dict) else {}
    for key, value in second.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = compose_patches(out[key], value)
        else:
            out[key] = value
    return out


def relaunch_body(job, change: JobRelaunch) -> JobCreate:
    version = job.template_version if change.template_version is None else (
        None if change.template_version == "latest" else change.template_version)
    default_name = f"{job.template_name}-{job.id.hex[:8]}"
    name = change.display_name if change.display_name is not None else (
        None if job.display_name == default_name else job.display_name)
    fields = dict(template=job.template_name, template_version=version,
                  parameters={**(job.parameters or {}), **change.parameters},
                  overrides=compose_patches(job.overrides, change.overrides),
                  # A job of several backends is relaunched on all of them again (placed anew).
                  backend=change.backend or (None if getattr(job, "accepts", None) else job.backend), display_name=name,
                  labels={**(job.labels or {}), **change.labels})
    try:
        return JobCreate.model_validate(fields)
    except ValidationError as e:  # e.g. more parameters or labels together than a job may have
        raise Invalid.of(jobspec.pydantic_problems(e, "relaunch")) from None
