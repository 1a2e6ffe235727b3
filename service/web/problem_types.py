"""Every problem `type` this service answers, and a page for each at /problems/{slug}.

A problem's `type` is the relative reference `/problems/<slug>` (RFC 9457 allows a relative
URI; it resolves against the answer's own URL): it names the same type whichever host name
or address a client used, needs no setting, and always resolves on the service that
answered, in a browser or with `curl`. The middlewares that answer before the app runs
(body limits, admission, the request-head limits) use the same function."""
from __future__ import annotations

import html
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

PREFIX = "/problems/"


@dataclass(frozen=True)
class ProblemType:
    status: int
    title: str
    means: str
    fix: str


TYPES: dict[str, ProblemType] = {
    "bad-request": ProblemType(400, "Bad request", "The request could not be read as asked.",
                               "Read `detail`, correct the request and send it again."),
    "unauthorized": ProblemType(401, "Unauthorized", "No bearer token, or one that is unknown or revoked.",
                                "Send `Authorization: Bearer tj_...` with a live token. A lost first-start "
                                "token: `trainjobs tokens create --team default --role admin --name me` on "
                                "the service's host."),
    "forbidden": ProblemType(403, "Forbidden", "The token's role does not allow this, or the template does "
                             "not let members change a field the request changes.",
                             "Use a token with a higher role, or change only what the template's "
                             "`overridable` list names."),
    "stale-form": ProblemType(403, "Form expired", "A web UI form was sent with an expired or foreign "
                              "form token.", "Reload the page and send the form again."),
    "not-found": ProblemType(404, "Not found", "Nothing is at this address, or it belongs to another team.",
                             "Check the id or name; list what exists with `GET /v1/jobs` or "
                             "`GET /v1/templates`."),
    "unversioned-path": ProblemType(404, "Use the versioned path", "The API's resources live under their "
                                    "version, `/v1/...`; this path has no version.",
                                    "Send the same request to the path in `use` (e.g. `POST /v1/jobs`)."),
    "method-not-allowed": ProblemType(405, "Method not allowed", "This path exists, but not for this method.",
                                      "The `Allow` header lists the methods it takes; /docs shows each route."),
    "request-timeout": ProblemType(408, "Request Timeout", "The request line and headers did not arrive in "
                                   "time (TRAINJOBS_HTTP_HEADER_TIMEOUT_SECONDS).",
                                   "Send the request head promptly, in one go."),
    "body-timeout": ProblemType(408, "Request Timeout", "The body did not arrive in time or came too slowly "
                                "(TRAINJOBS_HTTP_BODY_* settings).", "Send the body promptly."),
    "conflict": ProblemType(409, "Conflict", "The request conflicts with the current state: a duplicate name, "
                            "an archived template, cancelling a finished job, a reused Idempotency-Key.",
                            "Read `detail`; fetch the resource's current state and decide again."),
    "limit-exceeded": ProblemType(409, "Team limit reached", "The job would cross one of the team's limits "
                                  "(concurrent jobs, accelerators, monthly spend).",
                                  "Wait for jobs to end, or ask a team admin to raise the limit "
                                  "(`PUT /v1/teams/{team}/limits`, or `on_exceed: queue`)."),
    "body-too-large": ProblemType(413, "Body too large", "The body is over TRAINJOBS_MAX_BODY_BYTES.",
                                  "Send a smaller body."),
    "invalid": ProblemType(422, "Invalid request", "The request is well-formed but asks for something that "
                           "cannot run.", "Each entry of `errors` names a field, what is wrong and the fix."),
    "invalid-request": ProblemType(422, "Invalid request", "The request does not match the schema.",
                                   "Each entry of `errors` names a field, what is wrong and the fix; "
                                   "/docs shows every route's schema."),
    "backend-rejected": ProblemType(422, "Backend rejected the job", "The backend (e.g. Vertex AI) refused "
                                    "the job for good: invalid argument, permission or quota.",
                                    "Read the backend's own words in `detail` and change the template or "
                                    "the project's set-up."),
    "too-many-streams": ProblemType(429, "Too many streams", "This credential already holds as many log "
                                    "streams as it may (TRAINJOBS_MAX_STREAMS_PER_CALLER).",
                                    "Close a stream, then retry after Retry-After."),
    "headers-too-large": ProblemType(431, "Request Header Fields Too Large", "The request line and headers "
                                     "are larger, or more numerous, than TRAINJOBS_HTTP_MAX_HEADER_BYTES / "
                                     "TRAINJOBS_HTTP_MAX_HEADERS allow.", "Send fewer or smaller headers."),
    "http-error": ProblemType(400, "HTTP error", "The request was refused at the HTTP level; `status` says "
                              "how.", "Read `detail`."),
    "internal": ProblemType(500, "Internal error", "Something unexpected went wrong; the service logged it "
                            "with the request id (X-Request-ID).",
                            "Retry; if it persists, give the operator the X-Request-ID."),
    "backend-refused": ProblemType(502, "Backend refused", "The backend refused an operation on a job that "
                                   "exists (e.g. no permission to cancel).", "Read the backend's words in `detail`."),
    "logs-refused": ProblemType(502, "Cloud Logging refused the request", "Cloud Logging refused to read a "
                                "job's logs.", "Read `detail`; check the service account's logging permissions."),
    "overloaded": ProblemType(503, "Service overloaded", "Every request slot or stream of the process was "
                              "busy; nothing was done.", "Retry after the Retry-After header's seconds."),
    "database-unavailable": ProblemType(503, "Database unavailable", "The database did not answer; nothing "
                                        "was done.", "Retry after Retry-After; the service recovers by itself."),
    "unavailable": ProblemType(503, "Service unavailable", "The service cannot do this right now; nothing "
                               "was done.", "Retry after Retry-After."),
    "logs-budget-spent": ProblemType(503, "Cloud Logging read budget spent", "The service's budget of Cloud "
                                     "Logging reads is spent for now.", "Retry after Retry-After."),
}

# Starlette's own HTTP errors (no route, wrong method, ...) by status.
HTTP_SLUGS = {400: "bad-request", 401: "unauthorized", 403: "forbidden", 404: "not-found",
              405: "method-not-allowed", 413: "body-too-large"}


def type_uri(slug: str, root_path: str = "") -> str:
    """The `type` of a problem: its page on this service, under the app's root path."""
    return f"{root_path.rstrip('/')}{PREFIX}{slug}"


router = APIRouter(include_in_schema=False)


@router.get(PREFIX + "{slug}")
def problem_page(slug: str, request: Request) -> HTMLResponse:
    from service.core.errors import NotFound

    kind = TYPES.get(slug)
    if kind is None:
        raise NotFound(f"no problem type {slug!r}; every type is listed at {PREFIX.rstrip('/')}")
    return _html(request, f"{kind.status} {kind.title}", _entry(slug, kind, request))


@router.get(PREFIX.rstrip("/"))
def problem_index(request: Request) -> HTMLResponse:
    items = "\n".join(_entry(slug, kind, request, link=True) for slug, kind in TYPES.items())
    return _html(request, "Problem types", items)


def _html(request: Request, title: str, body: str) -> HTMLResponse:
    from service.web.docs import framed_off  # the docs pages' headers (never framed, scripts from here only)

    root = html.escape(request.scope.get("root_path", "").rstrip("/"))
    return framed_off(HTMLResponse(_page(title, body, root)))


def _entry(slug: str, kind: ProblemType, request: Request, link: bool = False) -> str:
    uri = html.escape(type_uri(slug, request.scope.get("root_path", "")))
    name = f'<a href="{uri}">{html.escape(slug)}</a>' if link else f"<code>{uri}</code>"
    return (f"<section id=\"{html.escape(slug)}\"><h2>{name}: {kind.status} {html.escape(kind.title)}</h2>"
            f"<p>{_code(kind.means)}</p><p><strong>What to do:</strong> {_code(kind.fix)}</p></section>")


def _code(text: str) -> str:
    """`x` as <code>x</code>, everything escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _page(title: str, body: str, root: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>trainjobs - {html.escape(title)}</title>
<style>body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; padding: 0 1rem; }}
h2 {{ font-size: 1.1rem; }}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>A problem type of this service's answers (RFC 9457 problem+json: <code>type</code>, <code>title</code>,
<code>status</code>, <code>detail</code>). <a href="{root}/problems">Every type</a> · <a href="{root}/docs">API docs</a></p>
{body}
</body></html>
"""
