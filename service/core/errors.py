"""Domain errors. Services raise these; service.web.problems maps them to RFC 9457
problem+json responses. No web framework here, so the compiler and the backends
can raise them too."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where, what, and how to fix it."""

    field: str
    message: str
    fix: str = ""

    def prefixed(self, prefix: str) -> Problem:
        where = f"{prefix}.{self.field}" if self.field else prefix
        return Problem(where, self.message, self.fix)

    def as_dict(self) -> dict[str, str]:
        out = {"field": self.field, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        return out


class DomainError(Exception):
    status = 400
    title = "Bad request"
    slug = "bad-request"

    def __init__(self, detail: str, *, problems: list[Problem] | None = None,
                 headers: dict[str, str] | None = None, **extra):
        super().__init__(detail)
        self.detail = detail
        self.problems = list(problems or [])
        self.headers = dict(headers or {})
        self.extra = extra


class NotFound(DomainError):
    status, title, slug = 404, "Not found", "not-found"


class Conflict(DomainError):
    status, title, slug = 409, "Conflict", "conflict"


class Invalid(DomainError):
    """The request is well-formed JSON but asks for something that cannot run."""

    status, title, slug = 422, "Invalid request", "invalid"

    @classmethod
    def of(cls, problems: list[Problem]) -> Invalid:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return cls(f"{first.field}: {first.message}{more}", problems=problems)


class Unauthorized(DomainError):
    status, title, slug = 401, "Unauthorized", "unauthorized"


class Forbidden(DomainError):
    status, title, slug = 403, "Forbidden", "forbidden"


class BackendRejected(DomainError):
    """The cloud refused the job for good (invalid argument, permission, quota)."""

    status, title, slug = 422, "Backend rejected the job", "backend-rejected"


class BackendRefused(DomainError):
    """The backend refused an operation on a job that exists (e.g. no permission to cancel)."""

    status, title, slug = 502, "Backend refused", "backend-refused"


class Unavailable(DomainError):
    status, title, slug = 503, "Service unavailable", "unavailable"
