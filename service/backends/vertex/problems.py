"""The answers the API gives when a Vertex job's logs cannot be read (problem+json).

They are HTTP problems, not Google errors (errors.py sorts those): the log reader
raises them from a request thread and the app's problem handler turns them into
502 or 503 with Retry-After."""
from __future__ import annotations

from service.core.errors import DomainError, Unavailable


class LogsRefused(DomainError):
    """Cloud Logging said no for good (permission, bad filter): a problem answer, not a 500."""

    status, title, slug = 502, "Cloud Logging refused the request", "logs-refused"


class LogsBudgetSpent(Unavailable):
    """The Cloud Logging read budget is truly spent: 503 with Retry-After."""

    title, slug = "Cloud Logging read budget spent", "logs-budget-spent"
