"""What FastAPI's OpenAPI document cannot know by itself, added once for the whole app.

1. The answers every operation can get before its route runs.

The request-head limits (service/web/protocol.py: 408, 431), the body limits
(service/web/body_limits.py: 408, 413, 503), admission (service/web/overload.py: 503) and
FastAPI's body reading (400: a body that is not JSON text) answer for every route alike,
so they are documented here, once, on every operation they can answer, rather than on each
route: a generated client then knows each status it can meet, with its problem+json body.
What a route itself answers (401, 403, 404, 409, 422, ...) stays declared on the route.

2. The backends this app enables: every request body's `backend` lists them as an enum
(TRAINJOBS_BACKENDS), so the document is this deployment's, not every deployment's.

3. The body models of routes that read their own body (declared_body(): POST /v1/jobs,
service/jobs/submit_input.py): FastAPI documents only the bodies it reads, so their schemas are
added to the components as FastAPI itself makes them for a route that declares the body."""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}}
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}}

EVERY_REQUEST = {
    "408": "The request line and headers did not arrive in time (TRAINJOBS_HTTP_HEADER_TIMEOUT_SECONDS); "
           "the connection is closed",
    "431": "The request line and headers are too large or too many (TRAINJOBS_HTTP_MAX_HEADER_BYTES, "
           "TRAINJOBS_HTTP_MAX_HEADERS); the connection is closed",
}
WITH_A_BODY = {
    "400": "The body is not JSON text (e.g. not UTF-8): send a JSON document",
    "408": "The request head or body did not arrive in time (TRAINJOBS_HTTP_HEADER_TIMEOUT_SECONDS, "
           "TRAINJOBS_HTTP_BODY_* settings); the connection is closed",
    "413": "Request body too large (TRAINJOBS_MAX_BODY_BYTES)",
}
# Not queued for a request slot (service/web/overload.py, EXEMPT): no 503 from admission.
UNQUEUED = ("/healthz", "/readyz", "/metrics")
OVERLOADED = "Overloaded (every request slot busy, or the bodies being read fill TRAINJOBS_HTTP_BODY_BUFFER_BYTES) " \
             "or the database is unavailable: nothing was done; retry after Retry-After"


def add_transport_answers(doc: dict) -> dict:
    """Add them to a document FastAPI built; idempotent (an answer a route declares is kept)."""
    for path, item in doc.get("paths", {}).items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            answers = {**EVERY_REQUEST, **(WITH_A_BODY if "requestBody" in operation else {})}
            if path not in UNQUEUED:
                answers["503"] = OVERLOADED
            for status, description in answers.items():
                responses.setdefault(status, {"description": description, "content": PROBLEM})
            for status in ("429", "503"):
                if status in responses:
                    responses[status].setdefault("headers", RETRY_AFTER)
            operation["responses"] = dict(sorted(responses.items()))
    return doc


def name_backends(doc: dict, backends: list[str]) -> dict:
    """`backend` of every request body: one of these names (or null, where the field allows it)."""
    for schema in doc.get("components", {}).get("schemas", {}).values():
        field = schema.get("properties", {}).get("backend")
        if field is None or schema.get("additionalProperties") is not False:
            continue  # only request bodies refuse unknown fields; answers only report a backend
        for branch in field.get("anyOf", [field]):
            if branch.get("type") == "string":
                branch.pop("pattern", None)
                branch["enum"] = backends
        field["description"] = "One of the backends this service enables (TRAINJOBS_BACKENDS)"
    return doc


_DECLARED: dict[str, type[BaseModel]] = {}   # the bodies routes read themselves, by schema name


def declared_body(model: type[BaseModel]) -> dict:
    """The `requestBody` of an operation whose route reads a `model` body itself (openapi_extra);
    the model's schema joins the components (add_declared_schemas)."""
    _DECLARED[model.__name__] = model
    return {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}


def _declaring(model: type[BaseModel]) -> Any:
    def endpoint(body): ...   # its annotation is set below
    endpoint.__annotations__ = {"body": model}
    return endpoint


def add_declared_schemas(doc: dict) -> dict:
    """Each declared body's schema (and those it refers to), as FastAPI documents a declared body."""
    missing = [m for name, m in _DECLARED.items() if name not in doc.get("components", {}).get("schemas", {})]
    if missing:
        routes = [APIRoute(f"/{m.__name__}", _declaring(m), methods=["POST"]) for m in missing]
        made = get_openapi(title="declared", version="0", routes=routes)["components"]["schemas"]
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in made.items():
            schemas.setdefault(name, schema)
        doc["components"]["schemas"] = dict(sorted(schemas.items()))
    return doc


def install(app: FastAPI) -> None:
    build = app.openapi
    completed: list[tuple[int, tuple[str, ...]]] = []  # the document FastAPI built last, once completed

    def openapi() -> dict:
        doc = build()  # cached by FastAPI until the routes change
        wired = getattr(app.state, "services", None)  # set by the lifespan (service/web/container.py)
        backends = tuple(sorted(wired.backends)) if wired is not None else ()
        if completed != [(id(doc), backends)]:
            add_transport_answers(doc)
            add_declared_schemas(doc)
            if backends:
                name_backends(doc, list(backends))
            completed[:] = [(id(doc), backends)]
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
