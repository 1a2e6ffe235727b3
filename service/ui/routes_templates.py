"""Templates: the list, a version's spec, a diff between versions, and the launch
form with its dry-run preview (the API's POST /v1/jobs?dry_run=true)."""
from __future__ import annotations

import difflib
import json
import secrets
import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from service.core.errors import Conflict, Forbidden, Invalid
from service.jobs import service as jobs
from service.jobs.schemas import JobPreview
from service.jobs.submitter import Previewed
from service.jobspec import CompiledJob
from service.templates import service as templates
from service.templates.schemas import TEMPLATE_NAME_PATTERN
from service.ui import launch, launch_settings, routes_jobs, views
from service.ui import priority as priority_classes
from service.ui.deps import Form, Member, UiUser, User
from service.ui.render import render
from service.ui.routing import HtmlRoute
from service.ui.views import VersionFacts
from service.web.container import SessionDep, services

router = APIRouter(prefix="/ui", route_class=HtmlRoute, include_in_schema=False)
Name = Annotated[str, Path(pattern=TEMPLATE_NAME_PATTERN)]
Version = Annotated[int | None, Query(ge=1, le=2**31 - 1)]
ROLES = ("chief", "workers", "parameter_servers", "evaluator", "reduction_server")


@router.get("/templates")
def templates_page(request: Request, session: SessionDep, user: User,
                   cursor: Annotated[str | None, Query(max_length=512)] = None):
    rows, next_cursor = templates.list_templates(session, user.actor.team_id, include_archived=True, limit=100,
                                                 cursor=cursor or None)
    return render(request, "templates.html", user=user, rows=rows, next_cursor=next_cursor)


def _document(tv: VersionFacts) -> str:
    return json.dumps({"description": tv.description, "parameters": tv.parameters, "spec": tv.spec},
                      indent=2, sort_keys=True, ensure_ascii=False)


@router.get("/templates/{name}")
def template_page(name: Name, request: Request, session: SessionDep, user: User, version: Version = None):
    tv = templates.get_version(session, user.actor.team_id, name, version)
    versions = templates.list_versions(session, user.actor.team_id, name)
    roles = [(r, tv.spec[r]) for r in ROLES if isinstance(tv.spec.get(r), dict)]
    known = priority_classes.classes(session, user.actor.team)
    return render(request, "template.html", user=user, tv=tv, versions=versions, roles=roles,
                  document=_document(tv), priority=priority_classes.field_for(tv.spec, known),
                  priority_text=priority_classes.describe(tv.spec.get("priority_class"), known))


@router.get("/templates/{name}/diff")
def template_diff(name: Name, request: Request, session: SessionDep, user: User,
                  a: Annotated[int, Query(ge=1, le=2**31 - 1)], b: Annotated[int, Query(ge=1, le=2**31 - 1)]):
    old = _document(templates.get_version(session, user.actor.team_id, name, a)).splitlines()
    new = _document(templates.get_version(session, user.actor.team_id, name, b)).splitlines()
    limit = services(request).ui_settings.diff_max_lines
    too_long = max(len(old), len(new)) > limit
    lines = [] if too_long else list(difflib.unified_diff(old, new, f"version {a}", f"version {b}", lineterm="", n=3))
    versions = templates.list_versions(session, user.actor.team_id, name)
    return render(request, "template_diff.html", user=user, name=name, a=a, b=b, lines=lines, versions=versions,
                  too_long=too_long, limit=limit)


def _launch_page(request: Request, user: UiUser, tv: VersionFacts, form: launch.LaunchForm,
                 preview: JobPreview | None = None, status: int = 200, source: uuid.UUID | None = None,
                 preview_class: str = ""):
    cluster = None
    if preview is not None:
        compiled = CompiledJob.from_json({"custom_job": preview.custom_job,
                                          "replicas": [_replica_dict(r) for r in preview.cluster]})
        cluster = dict(pools=views.pools(compiled),
                       replicas=[(r.task_name, r.tf_role, _tf_config(r.env)) for r in preview.cluster])
    return render(request, "launch.html", status, user=user, tv=tv, form=form, preview=preview, cluster=cluster,
                  backends=sorted(services(request).backends), source=source, preview_class=preview_class,
                  open_paths=tv.spec.get("overridable") or [])


def _replica_dict(r) -> dict:
    return {"pool": r.pool, "index": r.index, "task_name": r.task_name, "tf_role": r.tf_role,
            "image_uri": r.image_uri, "command": r.command, "args": r.args, "container_env": {}}


def _tf_config(env: dict) -> str | None:
    raw = env.get("TF_CONFIG")
    if raw is None:
        return None
    config = json.loads(raw)
    config.pop("job", None)  # the whole CustomJobSpec again: shown once, above
    return json.dumps(config, indent=2)


def _settings(request: Request, tv: VersionFacts, overrides=None) -> list[launch_settings.SettingField]:
    """The fields of what the template lets members change; machines and accelerators to pick
    from are those the service's price table knows in its region (and the template's own)."""
    pricer = services(request).pricer
    region = pricer.table.regions.get(pricer.region)
    return launch_settings.fields(tv.spec, region.machines if region else (), region.accelerators if region else (),
                                  overrides)


def _source_job(session: SessionDep, user: UiUser, job_id: uuid.UUID | None):
    return jobs.get_job(session, user.actor.team_id, job_id) if job_id else None


@router.get("/templates/{name}/launch")
def launch_page(name: Name, request: Request, session: SessionDep, user: Member, version: Version = None,
                source: Annotated[uuid.UUID | None, Query(alias="from")] = None):
    """The form; `from=<job id>` fills it with that job's values ("launch again")."""
    job = _source_job(session, user, source)
    if job is not None:  # the job's own version, unless a newer one was asked for (the job page links it)
        name, version = job.template_name, version or job.template_version
    tv = templates.get_version(session, user.actor.team_id, name, version)
    ui = services(request).ui_settings
    overrides = job.overrides if job else None
    form = launch.new_form(tv.parameters, job.parameters if job else {},
                           backend=_backend(tv, job, ui.default_backend),
                           labels=job.labels if job else None, overrides=overrides,
                           idempotency_key=secrets.token_urlsafe(16),
                           settings=_settings(request, tv, overrides),
                           priority=priority_classes.field_for(tv.spec, priority_classes.classes(session, user.actor.team),
                                                               overrides))
    return _launch_page(request, user, tv, form, source=source)


def _backend(tv: VersionFacts, job, default: str) -> str:
    """The form's backend: a template that accepts several lets the queue place the job ("", the
    first choice of the form); else the job's own (launch again) or the service's default."""
    if tv.spec.get("backends") and (job is None or job.accepts):
        return ""
    return job.backend if job is not None else default


def _check_class(lf: launch.LaunchForm, tv: VersionFacts, body: dict, user: UiUser, known: list) -> None:
    """A class the team may not use (or no class at all by that name), refused beside the field
    with the classes the team may use, before the service's own refusal (which names its API)."""
    refused = priority_classes.check(tv.spec, body["overrides"], user.actor.team, known)
    if refused is None:
        return
    if lf.priority is not None:
        lf.priority.error = refused
    else:
        lf.errors["overrides"] = f"priority_class: {refused}"


@router.post("/templates/{name}/launch")
def launch_post(name: Name, request: Request, session: SessionDep, user: Member, form: Form):
    try:
        version = int(str(form.get("version") or ""))
    except ValueError:
        version = None
    tv = templates.get_version(session, user.actor.team_id, name, version)
    state = services(request)
    known = priority_classes.classes(session, user.actor.team)
    lf, body = launch.read_form(tv.parameters, form, backend=_backend(tv, None, state.ui_settings.default_backend),
                                settings=_settings(request, tv), priority=priority_classes.field_for(tv.spec, known))
    _check_class(lf, tv, body, user, known)
    dry_run = form.get("action") != "launch"
    job_body = launch.job_create(name, tv.version, body, lf)
    if lf.has_errors or job_body is None:
        if job_body is not None:
            # The service's checks of what the form could read, beside the form's own problems
            # (issue 25: a bad parameter is not held back until the overrides are JSON).
            try:
                state.submitter.submit(session, job_body, user.actor, dry_run=True)
            except (Invalid, Forbidden) as e:
                session.rollback()
                launch.show_more_problems(lf, e.problems)
        return _launch_page(request, user, tv, lf, status=422)
    try:
        result = state.submitter.submit(session, job_body, user.actor, dry_run=dry_run,
                                        idempotency_key=None if dry_run else (lf.idempotency_key[:255] or None))
    except (Invalid, Forbidden) as e:
        # Bad values (422) and overrides this member may not make (403): beside their fields.
        session.rollback()
        launch.show_problems(lf, e.problems or [])
        if not e.problems:
            lf.other_errors.append(e.detail)
        return _launch_page(request, user, tv, lf, status=e.status)
    except Conflict as e:
        if "job_id" not in e.extra:
            raise
        # This form (its idempotency key) launched another job already, then was changed.
        session.rollback()
        lf.idempotency_key = secrets.token_urlsafe(16)
        lf.other_errors.append(f"This form already launched job {e.extra['job_id']} with other values. "
                               "Launch again to start a new job with these.")
        return _launch_page(request, user, tv, lf, status=409)
    if isinstance(result, Previewed):
        # The preview's name is made for it; the form keeps it, so Launch makes the job it named.
        lf.display_name = lf.display_name.strip() or result.preview.display_name
        return _launch_page(request, user, tv, lf, preview=result.preview, preview_class=priority_classes.describe(
            priority_classes.effective(tv.spec, body["overrides"]), known))
    # The submitter woke the controller for admission (lifecycle.wake).
    return routes_jobs.with_notice(result.job.id, "launched")
