"""Google's errors, sorted into "try again later" and "no".

Transient (429 rate limits, 5xx, timeouts, dropped connections) never fail a job;
everything else (400 invalid argument, 403 permission, 404, failed precondition, an
exhausted resource quota) is permanent and carries Google's own code and message.

A 429 is RESOURCE_EXHAUSTED whatever ran out, and its message is no guide ("Resource
has been exhausted (e.g. check quota)." is Google's wording for a plain rate limit
too). Only the structured details decide (google.rpc.ErrorInfo and QuotaFailure, in
`error.details`): reason RESOURCE_QUOTA_EXCEEDED, or a quota metric of the resources
a custom job holds (`aiplatform.googleapis.com/custom_model_training_*`: CPUs, GPUs,
TPUs), is a resource quota that waiting a few seconds will not clear, so the job
fails with Google's words. RATE_LIMIT_EXCEEDED, a request-count metric, or no
details at all is a rate limit: retried."""
from __future__ import annotations

from typing import TYPE_CHECKING

import requests
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exc

from service.lifecycle.protocol import PermanentBackendError, TransientBackendError

if TYPE_CHECKING:
    from service.backends.vertex.budget import Bucket

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
RESOURCE_QUOTA = "RESOURCE_QUOTA_EXCEEDED"       # google.api.ErrorReason: an allocation quota
RATE_LIMIT = "RATE_LIMIT_EXCEEDED"               # google.api.ErrorReason: a rate quota
RESOURCE_METRIC_PREFIXES = ("aiplatform.googleapis.com/custom_model_training_",)


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


def _details(exc: BaseException) -> list[dict]:
    if isinstance(exc, gexc.RetryError) and exc.cause is not None:
        return _details(exc.cause)
    raw = getattr(exc, "details", None) or []
    return [d for d in raw if isinstance(d, dict)]


def quota_markers(exc: BaseException) -> tuple[set[str], set[str]]:
    """(ErrorInfo reasons, quota metrics) Google put in the error's details."""
    reasons, metrics = set(), set()
    for d in _details(exc):
        kind = d.get("@type")
        if kind == ERROR_INFO:
            if isinstance(d.get("reason"), str):
                reasons.add(d["reason"])
            meta = d.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("quota_metric"), str):
                metrics.add(meta["quota_metric"])
        elif kind == QUOTA_FAILURE:
            for v in d.get("violations") or []:
                if isinstance(v, dict):
                    metric = v.get("quotaMetric") or v.get("quota_metric")
                    if isinstance(metric, str):
                        metrics.add(metric)
    return reasons, metrics


def is_quota_exhausted(exc: BaseException) -> bool:
    """A resource quota (not a rate limit) refused this request, as Google's details say."""
    if not isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted)):
        return False
    reasons, metrics = quota_markers(exc)
    if RATE_LIMIT in reasons:
        return False
    if RESOURCE_QUOTA in reasons:
        return True
    return any(m.startswith(RESOURCE_METRIC_PREFIXES) for m in metrics)


def is_rate_limited(exc: BaseException) -> bool:
    """A 429 that only says "not so fast": the budget of that kind pauses."""
    if isinstance(exc, gexc.RetryError) and exc.cause is not None:
        return is_rate_limited(exc.cause)
    return isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted)) and not is_quota_exhausted(exc)


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
        answer = f"Google answered {code} {status or type(exc).__name__}" if code else type(exc).__name__
        return TransientBackendError(f"{what}: {answer}: {message}", nothing_launched=refused)
    err = PermanentBackendError(message, code)
    err.status = status  # type: ignore[attr-defined]
    return err


def retry_policy(initial: float, deadline: float) -> Retry:
    """The client's own retry, for idempotent calls (get, list, cancel, logs)."""
    return Retry(predicate=is_transient, initial=initial, maximum=4.0, multiplier=2.0, timeout=deadline)


def as_backend_error(exc: BaseException, what: str) -> TransientBackendError | PermanentBackendError:
    """A call's failure as the lifecycle knows them; anything not from Google (or its
    transport) is a bug of ours and is raised again as it is."""
    if isinstance(exc, (TransientBackendError, PermanentBackendError)):
        return exc
    if not is_google_error(exc):
        raise exc
    return translate(exc, what)


def retry_note(err: BaseException, bucket: Bucket, then: str = "at the next controller pass") -> str:
    """One log line for a call Google refused for now (429, 5xx, a timeout): the operation,
    Google's answer, and when it is tried again. Expected: no traceback goes with it."""
    when = f"in {bucket.wait_time():.0f} s ({bucket.kind} calls pause after a 429)" if bucket.paused() else then
    return f"{err}; trying again {when}"
