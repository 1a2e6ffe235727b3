"""Errors. Every error answer of the API (RFC 9457 problem+json) becomes an
ApiError subclass chosen by its status, carrying `errors`: each bad field with
what is wrong and how to fix it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx


class TrainjobsError(Exception):
    """Base of every error this client raises."""


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str
    fix: str | None = None

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" + (f" ({self.fix})" if self.fix else "")


class ApiError(TrainjobsError):
    """The service answered with an error (problem+json)."""

    status: int = 0

    def __init__(self, status: int, title: str, detail: str, *, type: str = "about:blank",
                 instance: str | None = None, errors: list[FieldError] | None = None,
                 extra: dict[str, Any] | None = None, headers: httpx.Headers | None = None):
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.instance = instance
        self.errors = list(errors or [])
        self.extra = dict(extra or {})  # other members, e.g. job_id or current_state
        self.headers = headers or httpx.Headers()
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.status} {self.title}: {self.detail}"
        return "\n".join([head, *(f"  - {e}" for e in self.errors)])


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    """Missing, unknown or revoked token."""
    status = 401


class Forbidden(ApiError):
    """The token's role does not allow this."""
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    """Conflicts with the current state (duplicate name, finished job, reused Idempotency-Key)."""
    status = 409


class PayloadTooLarge(ApiError):
    status = 413


class InvalidRequest(ApiError):
    """Bad input; `errors` names each field and how to fix it."""
    status = 422


class ServerError(ApiError):
    status = 500


class BackendRefused(ApiError):
    """The backend (e.g. Vertex AI) refused the operation."""
    status = 502


class ServiceUnavailable(ApiError):
    """The service or its database is unavailable; retried automatically where safe."""
    status = 503


_BY_STATUS = {c.status: c for c in (BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge,
                                    InvalidRequest, ServerError, BackendRefused, ServiceUnavailable)}


class ConfigError(TrainjobsError, ValueError):
    """The saved configuration file cannot be read."""


class ConnectionFailed(TrainjobsError):
    """The service could not be reached (after the retries)."""


class WaitTimeout(TrainjobsError):
    """wait() gave up before the job (or sweep) ended; `job` is the last state seen."""

    def __init__(self, job, timeout: float):
        self.job = job
        self.timeout = timeout
        kind = "sweep" if hasattr(job, "trial_count") else "job"
        super().__init__(f"{kind} {job.id} is still {getattr(job.state, 'value', job.state)} after {timeout:g} s")


class NoMatch(TrainjobsError, LookupError):
    """resolve(): no job (or sweep) of the team has that id prefix or display name."""

    def __init__(self, kind: str, ref: str, hint: str = ""):
        self.kind, self.ref = kind, ref
        super().__init__(f"no {kind} has an id starting with {ref!r} or the name {ref!r}{hint}")


class Ambiguous(TrainjobsError, LookupError):
    """resolve(): several jobs (or sweeps) match; `candidates` holds them (at most `shown`),
    newest first, and `more` says whether there are others."""

    def __init__(self, kind: str, ref: str, candidates: list, more: bool):
        self.kind, self.ref, self.candidates, self.more = kind, ref, candidates, more
        super().__init__(f"{ref!r} matches {len(candidates)}{'+' if more else ''} {kind}s; "
                         "give more of the id (or the whole id)")


def from_response(response: httpx.Response) -> ApiError:
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else BadRequest)
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        # Not problem+json: a proxy's page, say. Keep its start as the detail.
        text = response.text.strip().replace("\n", " ")[:300]
        return cls(status, response.reason_phrase or "HTTP error", text or "(no body)", headers=response.headers)
    known = {"type", "title", "status", "detail", "instance", "errors"}
    errors = [FieldError(str(e.get("field", "")), str(e.get("message", "")), e.get("fix"))
              for e in body.get("errors") or [] if isinstance(e, dict)]
    return cls(status, str(body.get("title") or response.reason_phrase), str(body.get("detail") or ""),
               type=str(body.get("type") or "about:blank"), instance=body.get("instance"), errors=errors,
               extra={k: v for k, v in body.items() if k not in known}, headers=response.headers)
