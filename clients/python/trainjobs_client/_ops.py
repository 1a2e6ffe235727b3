"""The API's operations, written once without I/O: each is a generator that
yields the HTTP calls it needs and returns the typed result. The sync and the
async client only drive them (send a call, pass the response back in)."""
from __future__ import annotations

import json
import re
import uuid
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar, Union

import httpx
from pydantic import TypeAdapter

from trainjobs_client.errors import Ambiguous, NoMatch
from trainjobs_client.models import (
    BackendQueue,
    ImportedTemplate,
    Job,
    JobEvent,
    JobPreview,
    JobState,
    JobSummary,
    LogPage,
    Sweep,
    SweepSummary,
    TeamLimits,
    TeamUsage,
    Template,
    TemplateSummary,
    TemplateVersion,
    TokenInfo,
)

T = TypeVar("T")


@dataclass
class Call:
    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # safe: any transport error and 503 are retried (reads, keyed submits, idempotent writes);
    # connect: only failures where the request surely never reached the service.
    retry: Literal["safe", "connect"] = "safe"
    ok: tuple[int, ...] = ()  # error statuses handed back to the operation instead of raised


Op = Generator[Call, httpx.Response, T]
JobRef = Union[str, uuid.UUID, JobSummary]


def job_id(job: JobRef) -> str:
    if isinstance(job, JobSummary):
        return str(job.id)
    return str(uuid.UUID(str(job)))  # a typo'd id fails here, not as a 422 later


def _stamp(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


# --- jobs -------------------------------------------------------------------------------------

def job_body(template: str, parameters: dict | None, overrides: Any, backend: str | None,
             display_name: str | None, labels: dict | None, template_version: int | None) -> dict:
    body: dict[str, Any] = {"template": template}
    if template_version is not None:
        body["template_version"] = template_version
    if parameters:
        body["parameters"] = dict(parameters)
    if overrides is not None:
        body["overrides"] = overrides
    if backend:
        body["backend"] = backend
    if display_name is not None:
        body["display_name"] = display_name
    if labels:
        body["labels"] = dict(labels)
    return body


def submit(body: dict, idempotency_key: str | bool) -> Op[Job]:
    key = uuid.uuid4().hex if idempotency_key is True else (idempotency_key or None)
    # With a key a retry returns the job the first attempt made (Idempotent-Replayed), so
    # every failure is safe to retry; without one only those that never reached the service.
    r = yield Call("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key} if key else {},
                   retry="safe" if key else "connect")
    return Job.model_validate_json(r.content)


def preview(body: dict) -> Op[JobPreview]:
    r = yield Call("POST", "/v1/jobs", params=[("dry_run", "true")], json=body)
    return JobPreview.model_validate_json(r.content)


def get_job(job: JobRef) -> Op[Job]:
    r = yield Call("GET", f"/v1/jobs/{job_id(job)}")
    return Job.model_validate_json(r.content)


_summaries = TypeAdapter(list[JobSummary])


def job_filters(state, template, labels, created_after, created_before, id_prefix: str | None = None,
                name: str | None = None) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = _ref_filters(id_prefix, name)
    states = [state] if isinstance(state, (str, JobState)) else list(state or [])
    params += [("state", JobState(s).value) for s in states]
    if template:
        params.append(("template", template))
    items = labels.items() if isinstance(labels, dict) else [(x, None) for x in labels or []]
    params += [("label", k if v is None else f"{k}={v}") for k, v in items]
    if created_after is not None:
        params.append(("created_after", _stamp(created_after)))
    if created_before is not None:
        params.append(("created_before", _stamp(created_before)))
    return params


def job_page(filters: list[tuple[str, str]], cursor: str | None, limit: int) -> Op[tuple[list[JobSummary], str | None]]:
    params = [*filters, ("limit", str(limit))] + ([("cursor", cursor)] if cursor else [])
    r = yield Call("GET", "/v1/jobs", params=params)
    data = r.json()
    return _summaries.validate_python(data["items"]), data.get("next_cursor")


def _ref_filters(id_prefix: str | None, name: str | None) -> list[tuple[str, str]]:
    return ([("id_prefix", id_prefix.replace("-", ""))] if id_prefix else []) + \
        ([("name", name)] if name is not None else [])


# What resolve() accepts as an id prefix (the service takes 4 to 32 hex digits).
_HEX_PREFIX = re.compile(r"^[0-9a-fA-F]{4,32}$")
MAX_NAME = 128       # the longest display name the service stores
CANDIDATES = 10      # an ambiguous reference lists this many candidates at most


def resolve(kind: str, ref: str, page) -> Op[str]:
    """The id of the one job (kind "job", page=job_page) or sweep ("sweep", sweep_page)
    whose id starts with `ref` or whose display name is `ref`. A whole id is taken as it is,
    without a request; otherwise the service is asked (its id_prefix and name filters see
    every page), so the answer is right for a team with any number of them."""
    try:
        return str(uuid.UUID(ref))
    except ValueError:
        pass
    found: dict[uuid.UUID, Any] = {}
    more = False
    digits = ref.replace("-", "")
    queries = [[("id_prefix", digits.lower())]] if _HEX_PREFIX.match(digits) else []
    if 0 < len(ref) <= MAX_NAME:
        queries.append([("name", ref)])
    for filters in queries:
        items, cursor = yield from page(filters, None, CANDIDATES + 1)
        more = more or bool(cursor) or len(items) > CANDIDATES
        for item in items:
            found.setdefault(item.id, item)
    if len(found) == 1:
        return str(next(iter(found)))
    if not found:
        short = re.fullmatch(r"[0-9a-fA-F]{1,3}", digits) is not None
        raise NoMatch(kind, ref, " (an id prefix needs at least 4 hex digits)" if short else "")
    ranked = sorted(found.values(), key=lambda x: (x.created_at, x.id), reverse=True)
    raise Ambiguous(kind, ref, ranked[:CANDIDATES], more or len(ranked) > CANDIDATES)


_events = TypeAdapter(list[JobEvent])


def events(job: JobRef) -> Op[list[JobEvent]]:
    r = yield Call("GET", f"/v1/jobs/{job_id(job)}/events")
    return _events.validate_json(r.content)


def relaunch_body(parameters, overrides, backend, display_name, labels, template_version) -> dict:
    body: dict[str, Any] = {}
    for key, value in (("parameters", parameters), ("overrides", overrides), ("backend", backend),
                       ("display_name", display_name), ("labels", labels), ("template_version", template_version)):
        if value is not None:
            body[key] = dict(value) if key in ("parameters", "labels") else value
    return body


def relaunch(job: JobRef, body: dict, idempotency_key: str | bool) -> Op[Job]:
    key = uuid.uuid4().hex if idempotency_key is True else (idempotency_key or None)
    r = yield Call("POST", f"/v1/jobs/{job_id(job)}/relaunch", json=body,
                   headers={"Idempotency-Key": key} if key else {}, retry="safe" if key else "connect")
    return Job.model_validate_json(r.content)


def cancel(job: JobRef) -> Op[Job]:
    r = yield Call("POST", f"/v1/jobs/{job_id(job)}/cancel", retry="connect")
    return Job.model_validate_json(r.content)


def log_page(job: JobRef, replica: str | None, since: str | None, limit: int) -> Op[LogPage]:
    params = [("limit", str(limit))] + ([("replica", replica)] if replica else []) + \
             ([("since", since)] if since else [])
    r = yield Call("GET", f"/v1/jobs/{job_id(job)}/logs", params=params)
    return LogPage.model_validate_json(r.content)


def follow_call(job: JobRef, replica: str | None, cursor: str | None) -> Call:
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if cursor:
        headers["Last-Event-ID"] = cursor  # resume after the last line received
    return Call("GET", f"/v1/jobs/{job_id(job)}/logs",
                params=[("follow", "true")] + ([("replica", replica)] if replica else []), headers=headers)


def whoami() -> Op[TokenInfo]:
    r = yield Call("GET", "/v1/tokens/me")
    return TokenInfo.model_validate_json(r.content)


# --- the queue -------------------------------------------------------------------------------

def queue(backend: str | None, limit: int, offset: int) -> Op[list[BackendQueue]]:
    params = [("limit", str(limit)), ("offset", str(offset))] + ([("backend", backend)] if backend is not None else [])
    r = yield Call("GET", "/v1/queue", params=params)
    return [BackendQueue.model_validate(item) for item in r.json()["items"]]


# --- team limits ------------------------------------------------------------------------------

def team_limits(team: str) -> Op[TeamLimits]:
    r = yield Call("GET", f"/v1/teams/{team}/limits")
    return TeamLimits.model_validate_json(r.content)


def set_team_limits(team: str, body: dict) -> Op[TeamLimits]:
    # A PUT of the whole set: repeating it is harmless.
    r = yield Call("PUT", f"/v1/teams/{team}/limits", json=body)
    return TeamLimits.model_validate_json(r.content)


def team_usage(team: str) -> Op[TeamUsage]:
    r = yield Call("GET", f"/v1/teams/{team}/usage")
    return TeamUsage.model_validate_json(r.content)


def limits_body(max_concurrent_jobs, max_accelerators, max_monthly_spend, on_exceed) -> dict:
    return {"max_concurrent_jobs": max_concurrent_jobs, "max_accelerators": dict(max_accelerators or {}),
            "max_monthly_spend": None if max_monthly_spend is None else str(max_monthly_spend),
            "on_exceed": on_exceed}


# --- templates --------------------------------------------------------------------------------

_template_summaries = TypeAdapter(list[TemplateSummary])
_versions = TypeAdapter(list[TemplateVersion])


def template_page(include_archived: bool, cursor: str | None,
                  limit: int) -> Op[tuple[list[TemplateSummary], str | None]]:
    params = [("limit", str(limit)), ("include_archived", "true" if include_archived else "false")]
    r = yield Call("GET", "/v1/templates", params=params + ([("cursor", cursor)] if cursor else []))
    data = r.json()
    return _template_summaries.validate_python(data["items"]), data.get("next_cursor")


def get_template(name: str, version: int | None = None) -> Op[Template]:
    r = yield Call("GET", f"/v1/templates/{name}", params=[("version", str(version))] if version else [])
    return Template.model_validate_json(r.content)


def template_versions(name: str) -> Op[list[TemplateVersion]]:
    r = yield Call("GET", f"/v1/templates/{name}/versions")
    return _versions.validate_json(r.content)


def template_body(spec: dict, parameters: list[dict] | None, description: str) -> dict:
    return {"description": description, "spec": spec, "parameters": list(parameters or [])}


def create_template(name: str, body: dict) -> Op[Template]:
    r = yield Call("POST", "/v1/templates", json={"name": name, **body}, retry="connect")
    return Template.model_validate_json(r.content)


def preview_template(name: str, body: dict) -> Op[dict]:
    """The body as the service would store it (POST /v1/templates?dry_run=true): defaults filled in,
    nulls dropped, checked; nothing stored."""
    r = yield Call("POST", "/v1/templates", params=[("dry_run", "true")], json={"name": name, **body}, retry="connect")
    return template_body(**{k: r.json()[k] for k in ("spec", "parameters", "description")})


def update_template(name: str, body: dict) -> Op[Template]:
    r = yield Call("PUT", f"/v1/templates/{name}", json=body, retry="connect")
    return Template.model_validate_json(r.content)


def set_archived(name: str, archived: bool) -> Op[Template]:
    r = yield Call("POST", f"/v1/templates/{name}/{'archive' if archived else 'unarchive'}")
    return Template.model_validate_json(r.content)


@dataclass(frozen=True)
class Applied:
    """What templates.apply() did: created, updated (a new version) or unchanged."""

    action: Literal["created", "updated", "unchanged"]
    template: Template
    previous: Template | None  # the latest version before, if there was one


def stored_form(template: Template) -> dict:
    return {"description": template.description, "spec": template.spec, "parameters": template.parameters}


def canonical(body: dict) -> str:
    return json.dumps({"description": body.get("description", ""), "spec": body.get("spec"),
                       "parameters": body.get("parameters") or []}, sort_keys=True)


def apply_template(name: str, body: dict) -> Op[Applied]:
    """Create the template, or write a new version only if `body` differs from the latest.
    The service stores specs with defaults filled in: compare like with like (the CLI
    normalises files the way the service does before calling this)."""
    r = yield Call("GET", f"/v1/templates/{name}", ok=(404,))
    if r.status_code == 404:
        created = yield from create_template(name, body)
        return Applied("created", created, None)
    current = Template.model_validate_json(r.content)
    if canonical(body) == canonical(stored_form(current)):
        return Applied("unchanged", current, current)
    updated = yield from update_template(name, body)
    return Applied("updated", updated, current)


# --- sweeps -----------------------------------------------------------------------------------

SweepRef = Union[str, uuid.UUID, SweepSummary]


def sweep_id(sweep: SweepRef) -> str:
    if isinstance(sweep, SweepSummary):
        return str(sweep.id)
    return str(uuid.UUID(str(sweep)))


def create_sweep(body: dict, dry_run: bool) -> Op[Sweep]:
    # A sweep has no Idempotency-Key: retried only where the request surely never arrived.
    r = yield Call("POST", "/v1/sweeps", params=[("dry_run", "true")] if dry_run else [], json=body,
                   retry="safe" if dry_run else "connect")
    return Sweep.model_validate_json(r.content)


def get_sweep(sweep: SweepRef) -> Op[Sweep]:
    r = yield Call("GET", f"/v1/sweeps/{sweep_id(sweep)}")
    return Sweep.model_validate_json(r.content)


_sweep_summaries = TypeAdapter(list[SweepSummary])


def sweep_filters(states: list[str], id_prefix: str | None = None, name: str | None = None) -> list[tuple[str, str]]:
    return [("state", s) for s in states] + _ref_filters(id_prefix, name)


def sweep_page(filters: list[tuple[str, str]], cursor: str | None,
               limit: int) -> Op[tuple[list[SweepSummary], str | None]]:
    params = [*filters, ("limit", str(limit))] + ([("cursor", cursor)] if cursor else [])
    r = yield Call("GET", "/v1/sweeps", params=params)
    data = r.json()
    return _sweep_summaries.validate_python(data["items"]), data.get("next_cursor")


def resume_sweep(sweep: SweepRef) -> Op[Sweep]:
    # Resuming a RUNNING sweep changes nothing, so a retry is safe.
    r = yield Call("POST", f"/v1/sweeps/{sweep_id(sweep)}/resume")
    return Sweep.model_validate_json(r.content)


def cancel_sweep(sweep: SweepRef) -> Op[Sweep]:
    # Cancelling twice is fine (202 again while CANCELLING), so a retry is safe.
    r = yield Call("POST", f"/v1/sweeps/{sweep_id(sweep)}/cancel")
    return Sweep.model_validate_json(r.content)


# --- AI Platform configs and gcloud -----------------------------------------------------------

IMPORT_FORMATS = ("aiplatform-config", "vertex-config", "gcloud", "worker-pool-specs")
EXPORT_FORMATS = ("gcloud", "config", "sdk")


def import_template(source: str | list[str], fmt: str, name: str | None, description: str | None,
                    dry_run: bool) -> Op[ImportedTemplate]:
    body: dict[str, Any] = {"format": fmt, "source": source, "dry_run": dry_run}
    if name:
        body["name"] = name
    if description is not None:
        body["description"] = description
    # Storing creates a template (a retry after a lost answer would meet 409); converting changes nothing.
    r = yield Call("POST", "/v1/templates:import", json=body, retry="connect" if name and not dry_run else "safe")
    return ImportedTemplate.model_validate_json(r.content)


def export_job(job: JobRef, fmt: str) -> Op[str]:
    r = yield Call("GET", f"/v1/jobs/{job_id(job)}/export", params=[("format", fmt)])
    return r.text


def export_template(name: str, fmt: str, version: int | None, parameters: dict[str, Any] | None) -> Op[str]:
    params = [("format", fmt)] + ([("version", str(version))] if version else [])
    params += [("param", f"{k}={_param_text(v)}") for k, v in (parameters or {}).items()]
    r = yield Call("GET", f"/v1/templates/{name}/export", params=params)
    return r.text


def _param_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
