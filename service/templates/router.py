from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import JSONResponse

from service.auth.deps import Admin, Viewer
from service.persistence.models import TemplateVersion
from service.templates import service
from service.templates.schemas import (
    MAX_VERSION,
    TEMPLATE_NAME_PATTERN,
    TemplateBody,
    TemplateCreate,
    TemplateOut,
    TemplatePage,
    TemplatePreview,
    TemplateSummary,
    VersionSummary,
)
from service.web.container import SessionDep
from service.web.lookup import Cursor
from service.web.problems import problem_responses

NameParam = Annotated[str, Path(pattern=TEMPLATE_NAME_PATTERN, description="The template's name")]

router = APIRouter(prefix="/v1/templates", tags=["templates"])


def _out(tv: TemplateVersion) -> TemplateOut:
    t = tv.template
    return TemplateOut(name=t.name, version=tv.version, latest_version=t.latest_version,
                       archived=t.archived_at is not None, description=tv.description, spec=tv.spec,
                       parameters=tv.parameters, created_at=tv.created_at, created_by=tv.created_by)


@router.post("", status_code=201, response_model=TemplateOut, operation_id="templates_create",
             summary="Create a template (version 1), or preview it with ?dry_run=true",
             responses={200: {"model": TemplatePreview,
                              "description": "Dry run: the template as it would be stored; nothing stored"},
                        **problem_responses(401, 403, 409, 413, 422, 503)})
def create_template(body: TemplateCreate, session: SessionDep, actor: Admin, response: Response,
                    dry_run: Annotated[bool, Query(description="Check it and show it as it would be stored "
                                                               "(defaults filled in); store nothing.")] = False):
    if dry_run:
        spec, params = service.preview(body)
        preview = TemplatePreview(name=body.name, description=body.description, spec=spec, parameters=params)
        return JSONResponse(preview.model_dump(mode="json"), status_code=200)
    tv = service.create(session, actor.team_id, body, actor.name)
    response.headers["Location"] = f"/v1/templates/{tv.template.name}"
    return _out(tv)


@router.get("", response_model=TemplatePage, operation_id="templates_list", summary="List templates",
            responses=problem_responses(401, 422, 503))
def list_templates(session: SessionDep, actor: Viewer,
                   include_archived: bool = False,
                   limit: Annotated[int, Query(ge=1, le=200)] = 50,
                   cursor: Cursor = None):
    rows, next_cursor = service.list_templates(session, actor.team_id, include_archived=include_archived,
                                               limit=limit, cursor=cursor)
    return TemplatePage(items=[TemplateSummary(name=t.name, latest_version=t.latest_version,
                                               archived=t.archived_at is not None, description=description,
                                               updated_at=t.updated_at) for t, description in rows],
                        next_cursor=next_cursor)


@router.get("/{name}", response_model=TemplateOut, operation_id="templates_get",
            summary="Get a template (latest version or ?version=N)", responses=problem_responses(401, 404, 422, 503))
def get_template(name: NameParam, session: SessionDep, actor: Viewer,
                 version: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None):
    return _out(service.get_version(session, actor.team_id, name, version))


@router.get("/{name}/versions", response_model=list[VersionSummary], operation_id="templates_versions",
            summary="List a template's versions", responses=problem_responses(401, 404, 422, 503))
def list_versions(name: NameParam, session: SessionDep, actor: Viewer):
    return [VersionSummary(version=v.version, description=v.description, created_at=v.created_at,
                           created_by=v.created_by) for v in service.list_versions(session, actor.team_id, name)]


@router.put("/{name}", response_model=TemplateOut, operation_id="templates_update",
            summary="Update a template (writes a new version)",
            responses=problem_responses(401, 403, 404, 409, 413, 422, 503))
def update_template(name: NameParam, body: TemplateBody, session: SessionDep, actor: Admin):
    return _out(service.update(session, actor.team_id, name, body, actor.name))


@router.post("/{name}/archive", response_model=TemplateOut, operation_id="templates_archive",
             summary="Archive a template: no new jobs from it; existing jobs are kept",
             responses=problem_responses(401, 403, 404, 422, 503))
def archive_template(name: NameParam, session: SessionDep, actor: Admin):
    return _out(service.set_archived(session, actor.team_id, name, True))


@router.post("/{name}/unarchive", response_model=TemplateOut, operation_id="templates_unarchive",
             summary="Make an archived template usable again", responses=problem_responses(401, 403, 404, 422, 503))
def unarchive_template(name: NameParam, session: SessionDep, actor: Admin):
    return _out(service.set_archived(session, actor.team_id, name, False))
