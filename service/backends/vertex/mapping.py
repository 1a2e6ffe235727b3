"""Vertex AI's view of a job -> ours: states, errors, times, and the list filters
that find our jobs by label."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.cloud import aiplatform_v1 as v1
from google.rpc import code_pb2

from service.jobspec.reserved import JOB_ID_LABEL, LEGACY_JOB_ID_LABEL
from service.jobspec.spec import INFRASTRUCTURE_CODES
from service.lifecycle.protocol import JobHandle, Observation
from service.lifecycle.states import TERMINAL, JobState

VS = v1.JobState
STATES: dict[int, JobState] = {
    VS.JOB_STATE_QUEUED: JobState.QUEUED,
    VS.JOB_STATE_PENDING: JobState.PENDING,
    VS.JOB_STATE_RUNNING: JobState.RUNNING,
    VS.JOB_STATE_SUCCEEDED: JobState.SUCCEEDED,
    VS.JOB_STATE_FAILED: JobState.FAILED,
    VS.JOB_STATE_CANCELLING: JobState.CANCELLING,
    VS.JOB_STATE_CANCELLED: JobState.CANCELLED,
    VS.JOB_STATE_PAUSED: JobState.PAUSED,
    VS.JOB_STATE_EXPIRED: JobState.EXPIRED,
    VS.JOB_STATE_UPDATING: JobState.UPDATING,
    VS.JOB_STATE_PARTIALLY_SUCCEEDED: JobState.PARTIALLY_SUCCEEDED,
}
ENDED = [s for s, ours in STATES.items() if ours in TERMINAL]
RUNNING_ON_VERTEX = [s for s, ours in STATES.items() if ours not in TERMINAL]  # incl. CANCELLING

# Our created_at is stamped before the CustomJob exists, so Vertex's create_time
# is later; the slack absorbs clock skew between this host and Google.
CREATE_TIME_SLACK = timedelta(minutes=10)

# What poll needs of each CustomJob: not its (large) jobSpec, nor timestamps it
# does not use (parsing RFC 3339 strings is most of a list's client-side cost).
POLL_FIELDS = ["name", "labels", "state", "start_time", "end_time", "error"]


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job_id_of(cj: v1.CustomJob) -> str | None:
    """The trainjobs job a CustomJob belongs to, by its label (or the old hyphenated one)."""
    return cj.labels.get(JOB_ID_LABEL) or cj.labels.get(LEGACY_JOB_ID_LABEL)


def is_legacy(custom_job: dict) -> bool:
    """Compiled before the label key lost its hyphen: its CustomJob may carry only the old key."""
    return LEGACY_JOB_ID_LABEL in (custom_job.get("labels") or {})


def _labelled(key: str = JOB_ID_LABEL) -> str:
    return f"labels.{key}:*"


def running_filter(since: datetime) -> str:
    """Our CustomJobs created since `since` that have not ended (CANCELLING included)."""
    ended = " AND ".join(f'state!="{VS(s).name}"' for s in ENDED)
    return f'{_labelled()} AND create_time>="{rfc3339(since - CREATE_TIME_SLACK)}" AND {ended}'


def label_filter(job_id: str, *, legacy: bool = False) -> str:
    return f'labels.{LEGACY_JOB_ID_LABEL if legacy else JOB_ID_LABEL}="{job_id}"'


def our_state(cj: v1.CustomJob) -> JobState | None:
    return STATES.get(cj.state)


# google.rpc codes Vertex AI reports for its own infrastructure, not the job's code
# (service/jobspec/spec.py INFRASTRUCTURE_CODES: the retry policy's on_infrastructure_error).
INFRASTRUCTURE = {code: name for name, code in INFRASTRUCTURE_CODES.items()}
_EXIT = "non-zero status of "   # Vertex AI's words for a replica that ended


def cause_of(code: int, message: str) -> str | None:
    """Why a CustomJob failed, as far as Google's error says: "preemption" (a Spot VM was
    reclaimed: the message names a preemption), "infrastructure" (INTERNAL, UNAVAILABLE,
    RESOURCE_EXHAUSTED), or None (the job's own code or configuration)."""
    if "preempt" in message.lower():
        return "preemption"
    if code in INFRASTRUCTURE:
        return "infrastructure"
    return None


def exit_code_of(message: str) -> int | None:
    """The replica's exit status in Vertex AI's words ("... exited with a non-zero status of 137");
    shared/VERTEX.md."""
    at = message.find(_EXIT)
    if at < 0:
        return None
    digits = ""
    for ch in message[at + len(_EXIT):]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def error_of(cj: v1.CustomJob) -> dict | None:
    """Google's code and message for a job that did not succeed, and what caused it."""
    if not cj.error.code and not cj.error.message:
        return None
    return error_from(cj.error.code, cj.error.message)


def error_from(code: int, message: str) -> dict:
    """The normalised facts the lifecycle reads (lifecycle/retries.py): `cause`, `lost` and the
    replica's `exit_code`, parsed here from Google's words so no layer above reads them."""
    try:
        status = code_pb2.Code.Name(code)
    except ValueError:
        status = None
    out: dict = {"code": code, "status": status, "message": message, "source": "vertex"}
    cause = cause_of(code, message)
    if cause is not None:
        out["cause"] = cause
    if cause == "preemption":
        out["lost"] = True   # a replica gone without an exit status: the retry policy's on_signal
    exit_code = exit_code_of(message)
    if exit_code is not None:
        out["exit_code"] = exit_code
    return out


def _cause_note(error: dict | None) -> str:
    err = error or {}
    cause = err.get("cause")
    if cause == "preemption":
        return " (Spot VM preempted: Google reclaimed the capacity, not a failure of the job's code)"
    if cause == "infrastructure":
        return f" (Vertex AI infrastructure error {err.get('status')}, not a failure of the job's code)"
    return ""


def _aware(ts) -> datetime | None:
    if ts is None:
        return None
    dt = datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond, tzinfo=UTC)
    return None if dt.year <= 1970 else dt


def observe(job: JobHandle, cj: v1.CustomJob, console_url: str, *, adopted_reason: str = "") -> Observation | None:
    """What changed, as an Observation; None when Vertex says nothing new."""
    vertex = our_state(cj)
    state = vertex if vertex is not None and vertex != job.state else None
    if state is not None and job.state == JobState.CANCELLING and state not in TERMINAL:
        state = None  # the cancel has not reached it yet; poll re-sends it
    new_ref = job.backend_ref != cj.name
    if state is None and not new_ref:
        return None
    error = error_of(cj) if state in (JobState.FAILED, JobState.CANCELLED, JobState.EXPIRED,
                                       JobState.PARTIALLY_SUCCEEDED) else None
    if state is not None:
        reason = f"Vertex AI: {VS(cj.state).name}" + _cause_note(error)
        if error and error["message"]:
            reason += f": {error['message']}"
    else:
        reason = adopted_reason
    return Observation(job_id=job.id, state=state, reason=reason, error=error, backend_ref=cj.name,
                       console_url=console_url, started_at=_aware(cj.start_time),
                       ended_at=_aware(cj.end_time) if state in TERMINAL else None)


def with_missed_start(job: JobHandle, obs: Observation) -> list[Observation]:
    """A job that started and ended between two polls (Vertex reports its startTime) never
    showed RUNNING to us: RUNNING first, at that startTime, then how it ended. Two
    observations, applied in order, so the events read QUEUED/PENDING -> RUNNING -> end and
    `job.running` goes out once, as for a job seen running."""
    if (obs.state not in TERMINAL or obs.started_at is None
            or job.state not in (JobState.QUEUED, JobState.PENDING)):
        return [obs]
    ran = Observation(job_id=obs.job_id, state=JobState.RUNNING, backend_ref=obs.backend_ref,
                      console_url=obs.console_url, started_at=obs.started_at,
                      reason=f"Vertex AI: JOB_STATE_RUNNING since {rfc3339(obs.started_at)} "
                             f"(its startTime; it ended before a poll saw it running)")
    return [ran, obs]
