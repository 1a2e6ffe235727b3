"""POST /v1/jobs reads its own input: the JSON body, `?dry_run`, the `Idempotency-Key` header
and the bearer token, answering exactly as FastAPI answers for the route's declaration
(DECLARED below; the OpenAPI document shows it, tests/jobs/test_submit_input.py proves the
answers equal, request by request).

Why not FastAPI's own handling: for one query parameter, one header and one dependency it
took a fifth of a submit's CPU (bench/profile_submit.py --parts: 493 µs of 2.4 ms), more than
the whole compile. Here the same steps cost what the work itself costs (the JSON, the model).

FastAPI's order, kept: the body is read and parsed first (invalid JSON: 422; not JSON text:
400), then the token (401, 403), then the query, the header and the body are validated, and
every error among them is answered in one 422 (query, header, body, in that order)."""
from __future__ import annotations

import email.message
import json
from typing import Annotated, Any

from fastapi import Body, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from service.auth.authenticate import Authenticated
from service.auth.deps import bearer, member_auth
from service.jobs.schemas import JobCreate
from service.jobs.submitter import IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_KEY_PATTERN
from service.web import openapi_document

DRY_RUN_DOC = "Validate and compile only; store nothing."
IDEMPOTENCY_DOC = ("Retry-safe submit: the same key and body return the same job; "
                   "the same key with another body answers 409.")

# The fields as FastAPI would build them from the declaration (a TypeAdapter of the annotation
# and its FieldInfo), so that values and errors are FastAPI's.
_DRY_RUN = TypeAdapter(Annotated[bool, Query(description=DRY_RUN_DOC)])
_IDEMPOTENCY_KEY = TypeAdapter(Annotated[str | None, Header(
    max_length=IDEMPOTENCY_KEY_MAX_LENGTH, pattern=IDEMPOTENCY_KEY_PATTERN, description=IDEMPOTENCY_DOC)])
_BODY = TypeAdapter(Annotated[JobCreate, Body()])


def _param(name: str, where: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": where, "required": False, "description": description,
            "schema": {**schema, "description": description}}


# The operation's inputs in the OpenAPI document, as FastAPI documented the declaration
# `body: JobCreate, auth: CachedMember, dry_run: bool = Query(...), idempotency_key: str | None
# = Header(...)` (tests/jobs/openapi_jobs_snapshot.json holds it), JobCreate's schema included.
DECLARED = {
    "parameters": [
        _param("dry_run", "query", {"type": "boolean", "default": False, "title": "Dry Run"}, DRY_RUN_DOC),
        _param("idempotency-key", "header", {"anyOf": [
            {"type": "string", "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH, "pattern": IDEMPOTENCY_KEY_PATTERN},
            {"type": "null"}], "title": "Idempotency-Key"}, IDEMPOTENCY_DOC),
    ],
    "requestBody": openapi_document.declared_body(JobCreate),
    "security": [{bearer.scheme_name: []}],
}


class _Missing:
    """No body at all (FastAPI's Undefined)."""


MISSING = _Missing()
_JSON_TYPES: dict[str, bool] = {}   # Content-Type value -> is JSON (bounded below)
_JSON_TYPES_MAX = 64


def _is_json(content_type: str) -> bool:
    known = _JSON_TYPES.get(content_type)
    if known is None:
        message = email.message.Message()   # FastAPI's parse of the header, parameters and all
        message["content-type"] = content_type
        subtype = message.get_content_subtype()
        known = message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))
        if len(_JSON_TYPES) < _JSON_TYPES_MAX:   # a client may send any number of distinct values
            _JSON_TYPES[content_type] = known
    return known


async def read_body(request: Request) -> Any:
    """The body as FastAPI reads it for a JSON body: parsed when its Content-Type is JSON,
    else the bytes (which the model then refuses), MISSING when empty."""
    try:
        raw = await request.body()
        if not raw:
            return MISSING
        content_type = request.headers.get("content-type")
        if content_type and _is_json(content_type):
            return json.loads(raw)
        return raw   # no Content-Type, or another one: FastAPI's strict content type
    except json.JSONDecodeError as e:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": e.msg}}], body=e.doc) from e
    except HTTPException:
        raise
    except Exception as e:   # not UTF-8 text, for one
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from e


def _validate(adapter: TypeAdapter, value: Any, loc: tuple, errors: list) -> Any:
    try:
        return adapter.validate_python(value, from_attributes=True)
    except ValidationError as e:
        errors.extend({**err, "loc": loc + err.get("loc", ())} for err in e.errors(include_url=False))
        return None


async def submit_input(request: Request) -> tuple[JobCreate, Authenticated, bool, str | None]:
    """(body, caller, dry_run, idempotency key), or the answer FastAPI would give."""
    raw = await read_body(request)
    auth = await member_auth(request)
    errors: list[dict] = []
    dry_run = False
    if request.scope.get("query_string"):
        given = request.query_params.get("dry_run")
        if given is not None:
            dry_run = _validate(_DRY_RUN, given, ("query", "dry_run"), errors)
    key = request.headers.get("idempotency-key")
    if key is not None:
        key = _validate(_IDEMPOTENCY_KEY, key, ("header", "idempotency-key"), errors)
    if raw is MISSING:
        errors.append({"type": "missing", "loc": ("body",), "msg": "Field required", "input": None})
        body = None
    else:
        body = _validate(_BODY, raw, ("body",), errors)
    if errors:
        raise RequestValidationError(errors, body=None if raw is MISSING else raw)
    assert body is not None
    return body, auth, dry_run, key
