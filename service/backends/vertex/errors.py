"""Google's errors, sorted into "try again later" and "no".

Transient (429 rate limits, 5xx, timeouts, dropped connections) are retried with
backoff and never fail a job; everything else (400 invalid argument, 403
permission, 404, failed precondition, an exhausted resource quota) is permanent
and carries Google's own code and message."""
from __future__ import annotations

import re

import requests
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exc

from service.lifecycle.protocol import PermanentBackendError, TransientBackendError

# A 429 is a request-rate limit (wait and retry) unless it names a resource quota
# (GPUs, CPUs per region): that one will not clear by waiting a few seconds.
_RATE = re.compile(r"per (?:minute|second|hour|day)|rate limit|too many requests|RATE_LIMIT", re.I)
_QUOTA = re.compile(r"quota", re.I)


def google_error(exc: BaseException) -> tuple[int | None, str, str | None]:
    """(code, message, status) as Google wrote them in the error body."""
    if isinstance(exc, gexc.RetryError) and exc.cause is not None:
        return google_error(exc.cause)
    code = getattr(exc, "code", None)
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = getattr(exc, "message", None) or str(exc)
    status = None
    response = getattr(exc, "response", None)
    if response is not None:
        try:
            err = response.json().get("error", {})
        except (ValueError, AttributeError):
            err = {}
        if isinstance(err, dict):
            message = err.get("message") or message
            status = err.get("status")
            code = err.get("code", code)
    return code, message, status


def is_quota_exhausted(exc: BaseException) -> bool:
    if not isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted)):
        return False
    _, message, _ = google_error(exc)
    reason = getattr(exc, "reason", None) or ""
    if reason == "RATE_LIMIT_EXCEEDED" or _RATE.search(message):
        return False
    return bool(_QUOTA.search(message))


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, gexc.RetryError):
        return True  # our own deadline ran out retrying transient errors
    if isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted)):
        return not is_quota_exhausted(exc)
    if isinstance(exc, (gexc.ServerError, gexc.DeadlineExceeded, gexc.Aborted, gexc.Cancelled)):
        return True
    if isinstance(exc, gexc.GoogleAPICallError):
        return exc.code == 408
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                        requests.exceptions.ChunkedEncodingError, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, auth_exc.TransportError):
        return True
    if isinstance(exc, auth_exc.RefreshError):
        return bool(getattr(exc, "retryable", False))
    return False


def is_google_error(exc: BaseException) -> bool:
    return isinstance(exc, (gexc.GoogleAPIError, requests.exceptions.RequestException, ConnectionError,
                            TimeoutError, auth_exc.GoogleAuthError))


def translate(exc: BaseException, what: str) -> TransientBackendError | PermanentBackendError:
    code, message, status = google_error(exc)
    if is_transient(exc):
        # A 429 is refused before anything is done; a 5xx, timeout or reset may have
        # been carried out all the same.
        refused = isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted))
        return TransientBackendError(f"{what}: {type(exc).__name__}: {message}", nothing_launched=refused)
    err = PermanentBackendError(message, code)
    err.status = status  # type: ignore[attr-defined]
    return err


def retry_policy(initial: float, deadline: float) -> Retry:
    """The client's own retry, for idempotent calls (get, list, cancel, logs)."""
    return Retry(predicate=is_transient, initial=initial, maximum=4.0, multiplier=2.0, timeout=deadline)
