"""Every error answer is RFC 9457 problem+json: type, title, status, detail,
and for bad input an `errors` list naming each field and its fix."""
from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.core.errors import DomainError
from service.core.schema_base import FieldProblem
from service.web import methods, openapi_document
from service.web.problem_types import HTTP_SLUGS, type_uri
from service.web.versioned_paths import versioned_path

log = logging.getLogger("trainjobs.errors")
MEDIA_TYPE = "application/problem+json"


class ProblemDetails(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldProblem] | None = None
    errors_omitted: int | None = Field(None, description="How many more problems there were than `errors` lists "
                                       "(TRAINJOBS_MAX_PROBLEMS)")


PROBLEM_DESCRIPTIONS = {
    401: "Missing, unknown or revoked bearer token",
    403: "The token's role does not allow this",
    404: "Not found",
    409: "Conflict with the current state",
    413: "Request body too large",
    429: "Too many streams for this credential (TRAINJOBS_MAX_STREAMS_PER_CALLER): close one, retry after Retry-After",
    422: "Invalid input: `errors` names each field and how to fix it",
    502: "The backend (e.g. Vertex AI) refused the operation; its message is in detail",
    503: "Overloaded or database unavailable: nothing was done; retry after Retry-After",
}


def problem_responses(*codes: int) -> dict:
    """OpenAPI `responses` for the problem+json answers an operation can really give,
    so generated clients know each one (and only those)."""
    return {code: {"model": ProblemDetails, "description": PROBLEM_DESCRIPTIONS[code],
                   "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}}}
            for code in codes}


PROBLEM_RESPONSES = problem_responses(*PROBLEM_DESCRIPTIONS)


DEFAULT_MAX_PROBLEMS = 50
MAX_FIELD_CHARS, MAX_TEXT_CHARS = 256, 2000  # a field path may carry a hostile key of any length


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _bounded(errors: list[dict], limit: int) -> dict:
    """At most `limit` (TRAINJOBS_MAX_PROBLEMS) problems, each of bounded size, and how many were left out."""
    shown = [{k: _clip(str(v), MAX_FIELD_CHARS if k == "field" else MAX_TEXT_CHARS) for k, v in e.items()}
             for e in errors[:limit]]
    out: dict = {"errors": shown}
    if len(errors) > limit:
        out["errors_omitted"] = len(errors) - limit
    return out


def problem(status: int, title: str, detail: str, slug: str, request: Request, **extra) -> JSONResponse:
    body = {"type": type_uri(slug, request.scope.get("root_path", "")),
            "title": title, "status": status, "detail": _clip(detail, MAX_TEXT_CHARS),
            "instance": request.url.path, **extra}
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)


def _loc(loc: tuple) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:] if parts[0] == "body" else parts
    return ".".join(parts) or "body"


def install(app: FastAPI, max_problems: int = DEFAULT_MAX_PROBLEMS) -> None:
    # Over 60 lines on purpose: the app's exception handlers, each a few lines, declared together.
    openapi_document.install(app)  # the document: answers given before a route runs, the backends
    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError):
        extra = dict(exc.extra)
        if exc.problems:
            extra.update(_bounded([p.as_dict() for p in exc.problems], max_problems))
        resp = problem(exc.status, exc.title, exc.detail, exc.slug, request, **extra)
        resp.headers.update(exc.headers)
        return resp

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        errors = []
        for e in exc.errors():
            kind = e.get("type", "")
            if kind == "extra_forbidden":
                errors.append({"field": _loc(e["loc"]), "message": "unknown field", "fix": "remove it"})
            elif kind == "json_invalid":
                errors.append({"field": "body", "message": f"invalid JSON: {e.get('msg', '')}",
                               "fix": "send a valid JSON document"})
            elif kind == "missing":
                errors.append({"field": _loc(e["loc"]), "message": "required", "fix": "provide it"})
            else:
                errors.append({"field": _loc(e["loc"]), "message": e.get("msg", "invalid")})
        first = errors[0] if errors else {"field": "body", "message": "invalid"}
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return problem(422, "Invalid request", f"{_clip(first['field'], MAX_FIELD_CHARS)}: {first['message']}{more}",
                       "invalid-request", request, **_bounded(errors, max_problems))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        use = versioned_path(request) if exc.status_code == 404 else None
        if use:
            method = request.method
            return problem(404, "Use the versioned path", f"the API is versioned: send {method} {use}",
                           "unversioned-path", request, use=use)
        if exc.status_code == 405:
            # `Allow` lists every method of the path, not only the route's (service/web/methods.py).
            return methods.answer_options(request) or _method_not_allowed(request)
        title = {400: "Bad request", 404: "Not found"}.get(exc.status_code, "HTTP error")
        detail = str(exc.detail)
        if exc.status_code == 400 and detail == "There was an error parsing the body":  # FastAPI's words
            # What it caught is the cause: Python's JSON parser gives up past ~1,000 levels.
            detail = ("the body's JSON is nested too deeply to read; a request body is a few levels deep: "
                      "send it flatter") if isinstance(exc.__cause__, RecursionError) else \
                "the body is not JSON text (JSON is UTF-8); send a JSON document"
        resp = problem(exc.status_code, title, detail, HTTP_SLUGS.get(exc.status_code, "http-error"), request)
        for k, v in (exc.headers or {}).items():
            resp.headers[k] = v
        return resp

    @app.exception_handler(PoolTimeout)
    async def pool_exhausted(request: Request, exc: PoolTimeout):
        log.error("no database connection within the pool timeout")
        resp = problem(503, "Service overloaded", "no database connection was free in time; nothing was done: "
                       "retry in a moment", "overloaded", request)
        resp.headers["Retry-After"] = "1"
        return resp

    @app.exception_handler(OperationalError)
    async def database_down(request: Request, exc: OperationalError):
        log.error("database unavailable: %s", exc.__class__.__name__)
        return _db503(request)

    @app.exception_handler(DBAPIError)
    async def database_error(request: Request, exc: DBAPIError):
        if exc.connection_invalidated:
            return _db503(request)
        if isinstance(exc, DataError):
            # A value the database cannot store slipped past validation: still the input's fault.
            log.warning("database refused a value: %s", exc.orig.__class__.__name__)
            return problem(422, "Invalid request", "a value cannot be stored (e.g. a NUL character); "
                           "remove control characters and retry", "invalid-request", request)
        log.exception("database error")
        return problem(500, "Internal error", "an unexpected database error; it has been logged",
                       "internal", request)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        # No stack trace or message in the answer: it may hold secrets.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "Internal error", "an unexpected error; it has been logged", "internal", request)


def _method_not_allowed(request: Request) -> JSONResponse:
    allow = methods.allow_for(request)
    resp = problem(405, "Method not allowed", f"{request.method} is not a method of this path; it takes "
                   f"{allow or 'none'}", "method-not-allowed", request)
    if allow:
        resp.headers["Allow"] = allow
    return resp


def _db503(request: Request) -> JSONResponse:
    resp = problem(503, "Database unavailable", "the database did not answer; retry in a few seconds",
                   "database-unavailable", request)
    resp.headers["Retry-After"] = "5"
    return resp
