from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse
from pydantic import Field, StringConstraints

from service.auth.deps import Admin, Viewer
from service.core.schema_base import FieldProblem
from service.interop import service
from service.interop.schemas import ExportFormat, TemplateImport, TemplateImportOut
from service.templates.router import _out as template_out
from service.templates.schemas import MAX_VERSION, TEMPLATE_NAME_PATTERN
from service.web.container import SessionDep, services
from service.web.problems import problem_responses

router = APIRouter(tags=["interop"])

_TEXT = {"content": {"text/plain": {"schema": {"type": "string"}}},
         "description": "gcloud: a shell command (with the config file it needs written first, if any); "
                        "config: the YAML for `gcloud ai custom-jobs create --config`; sdk: Python for the Vertex "
                        "AI SDK"}
FormatQuery = Annotated[ExportFormat, Query(description="gcloud, config or sdk")]
# name=value: the pattern documents the form (a value without `=` answers 422 naming it, with the fix).
ParamQuery = Annotated[list[Annotated[str, StringConstraints(max_length=4200),
                                      Field(json_schema_extra={"pattern": "^[^=]+=[\\s\\S]*$"})]], Query(
    max_length=100, description="name=value, typed as the template declares (repeat); default: the defaults")]


@router.post("/v1/templates:import", response_model=TemplateImportOut, operation_id="templates_import",
             summary="Turn an AI Platform config or gcloud flags into a template (stored when a name is given)",
             status_code=200, responses={201: {"model": TemplateImportOut, "description": "Stored as a template"},
                                         **problem_responses(401, 403, 409, 413, 422, 503)})
def import_template(body: TemplateImport, request: Request, session: SessionDep, actor: Admin, response: Response):
    state = services(request)
    spec, description, warnings = service.convert(body, state.interop_settings, state.import_workers)
    out = TemplateImportOut(format=body.format, description=description, spec=spec, parameters=[],
                            warnings=[FieldProblem(**w.as_dict()) for w in warnings])
    if body.name and not body.dry_run:
        tv = service.store(session, actor.team_id, body.name, description, spec, actor.name)
        out.template = template_out(tv)
        response.status_code = 201
        response.headers["Location"] = f"/v1/templates/{body.name}"
    return out


@router.get("/v1/jobs/{job_id}/export", response_class=PlainTextResponse, operation_id="jobs_export",
            summary="A job's CustomJob, as launched, for gcloud or the Vertex SDK",
            responses={200: _TEXT, **problem_responses(401, 404, 422, 503)})
def export_job(job_id: uuid.UUID, request: Request, session: SessionDep, actor: Viewer,
               format: FormatQuery = "gcloud"):
    svc = services(request)
    return PlainTextResponse(service.export_job(session, svc.backends, actor.team_id, job_id, format,
                                                svc.interop_settings))


@router.get("/v1/templates/{name}/export", response_class=PlainTextResponse, operation_id="templates_export",
            summary="A template's CustomJob, compiled with its parameters, for gcloud or the Vertex SDK",
            responses={200: _TEXT, **problem_responses(401, 404, 422, 503)})
def export_template(name: Annotated[str, Path(pattern=TEMPLATE_NAME_PATTERN)], request: Request,
                    session: SessionDep, actor: Viewer, format: FormatQuery = "gcloud",
                    version: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None, param: ParamQuery = []):
    return PlainTextResponse(service.export_template(session, actor.team_id, name, version, param, format,
                                                     services(request).interop_settings))
