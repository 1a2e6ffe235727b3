"""Retries: whether a failed job gets another attempt, and that attempt's row.

The engine calls `plan()` inside the transaction that moves a job to FAILED, so the
failure and its retry commit together or not at all: a controller that dies in
between leaves neither, and of two racing controllers only the one whose
compare-and-set moved the job gets here (the unique (retry_of, attempt) index
refuses a second attempt N anyway).

An attempt is a job of its own (its own row, events, logs and backend run) that
points at the first attempt (`retry_of`) and uses the first attempt's output
directory (CompiledJob.output_of), so the trainer's BackupAndRestore finds the
checkpoints there and resumes at the last finished epoch. It waits in QUEUED until
`not_before` (its backoff): admission skips it until then."""
from __future__ import annotations

import signal
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import JSON, Table, select
from sqlalchemy.orm import Session

from service.core.errors import Problem
from service.jobspec.reserved import JOB_ID_LABEL
from service.lifecycle import continuation
from service.lifecycle.states import JobState
from service.persistence import jobrows
from service.persistence.models import Job, JobCost

_COSTS: Table = JobCost.__table__   # type: ignore[assignment]  # a declarative class's Table


@dataclass(frozen=True)
class RetryLimits:
    """The service's bounds on what a retry policy may ask for (TRAINJOBS_RETRY_*)."""

    max_attempts: int = 10
    max_backoff_seconds: float = 86_400.0


def limit_problems(policy: Mapping[str, Any] | None, limits: RetryLimits) -> list[Problem]:
    """A job's effective policy against the service's bounds (checked at submit)."""
    if not policy:
        return []
    out = []
    if policy["max_attempts"] > limits.max_attempts:
        out.append(Problem("spec.retry.max_attempts", f"{policy['max_attempts']} attempts; this service allows "
                           f"at most {limits.max_attempts}",
                           f"ask for {limits.max_attempts} or fewer (TRAINJOBS_RETRY_MAX_ATTEMPTS)"))
    backoff = policy["backoff"]
    for key in ("initial_seconds", "max_seconds"):
        if backoff[key] > limits.max_backoff_seconds:
            out.append(Problem(f"spec.retry.backoff.{key}", f"{backoff[key]:g} s; this service waits at most "
                               f"{limits.max_backoff_seconds:g} s between attempts",
                               f"use {limits.max_backoff_seconds:g} or less "
                               "(TRAINJOBS_RETRY_MAX_BACKOFF_SECONDS)"))
    return out


def _signal_number(name: Any) -> int | None:
    try:
        return int(signal.Signals[name]) if isinstance(name, str) else None
    except KeyError:
        return None


def classify(policy: dict, error: dict | None) -> tuple[bool, str]:
    """(retried?, why) for a failure as the backend reported it (the job's `error`), read from
    the facts every backend normalises: `exit_code`, `signal`, `lost` (gone without an exit
    status) and `cause` ("preemption", "infrastructure" with the error's `status`)."""
    error = error if isinstance(error, dict) else {}
    cause = error.get("cause")
    sig_name = error.get("signal")
    exit_code = error.get("exit_code") if isinstance(error.get("exit_code"), int) else None
    if sig_name is None and exit_code is not None and exit_code > 128 and _signal_name(exit_code - 128):
        sig_name = _signal_name(exit_code - 128)      # a shell's 128+N: killed by signal N
    killed = sig_name is not None or bool(error.get("lost")) or cause == "preemption"
    signum = _signal_number(sig_name)
    status = signum + 128 if signum is not None else exit_code
    if status is not None and status in policy.get("fatal_exit_codes", []):
        return False, f"exit code {status} is fatal in the retry policy"
    if killed:
        what = f"killed by {sig_name}" if sig_name else "killed (preempted, or gone without an exit status)"
        return (True, f"the replica was {what}") if policy.get("on_signal", True) else (
            False, f"the replica was {what} and the policy does not retry signals (on_signal: false)")
    if exit_code is not None:
        if exit_code in policy.get("exit_codes", []):
            return True, f"exit code {exit_code} is retried by the policy"
        return False, f"exit code {exit_code} is not among the policy's exit_codes"
    if cause == "infrastructure":
        what = f"{error.get('source') or 'the backend'}'s infrastructure error {error.get('status') or error.get('code')}"
        if policy.get("on_infrastructure_error", True):
            return True, f"{what} (not the job's code)"
        return False, f"{what} and the policy does not retry them"
    return False, "not a failure the retry policy covers (signals, infrastructure errors, named exit codes)"


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def backoff_seconds(policy: dict, failed_attempt: int, limits: RetryLimits) -> float:
    """The wait before the attempt after `failed_attempt` (1-based): initial × multiplier^(n-1), capped."""
    b = policy["backoff"]
    wait = float(b["initial_seconds"]) * float(b["multiplier"]) ** (failed_attempt - 1)
    return min(wait, float(b["max_seconds"]), limits.max_backoff_seconds)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.4g} min"
    return f"{seconds / 3600:.4g} h"


@dataclass(frozen=True)
class Plan:
    """What the engine writes for a FAILED job: `note` ends the FAILED event's reason;
    with `row`, a new attempt is inserted (its first event reads `first_reason`)."""

    note: str = ""
    row: dict[str, Any] | None = None
    labels: dict[str, str] | None = None
    first_reason: str = ""


_COPIED = (Job.team_id, Job.display_name, Job.template_id, Job.template_name, Job.template_version, Job.backend,
           Job.parameters, Job.overrides, Job.labels, Job.compiled, Job.created_by,
           Job.demand, Job.priority_class, Job.priority, Job.may_preempt, Job.preemptions)


def plan(session: Session, job_id: uuid.UUID, from_state: JobState | None, at: datetime,
         limits: RetryLimits) -> Plan:
    """Decide whether the job that is moving to FAILED (its error already written) gets
    another attempt. A job whose cancel was asked for never does."""
    row = session.execute(select(*_COPIED, Job.error, Job.attempt, Job.retry_of)
                          .where(Job.id == job_id)).one_or_none()
    if row is None or not isinstance(row.compiled, dict):
        return Plan()
    # Attempts made for preemptions are extra: only the job's own failures count against max_attempts.
    failures = row.attempt - (row.preemptions or 0)
    policy = row.compiled.get("retry")
    if not policy or policy.get("max_attempts", 1) <= 1:
        return Plan()
    most = min(int(policy["max_attempts"]), limits.max_attempts)
    if from_state == JobState.CANCELLING:
        return Plan(f"; not retried: its cancel was requested (attempt {failures} of {most})")
    retried, why = classify(policy, row.error)
    if not retried:
        return Plan(f"; not retried: {why} (attempt {failures} of {most})")
    if failures >= most:
        return Plan(f"; not retried: attempt {failures} of {most} was the last ({why})")
    wait = backoff_seconds(policy, failures, limits)
    not_before = at + timedelta(seconds=wait)
    new = _next_attempt(row, job_id, at, not_before=not_before,
                        waiting=f"attempt {failures + 1} of {most} waits for its retry backoff until "
                                f"{not_before.isoformat(timespec='seconds')}")
    return Plan(note=f"; {why}: retried as job {new['id']} (attempt {failures + 1} of {most}) after {duration(wait)}",
                row=new, labels=dict(row.labels or {}),
                first_reason=f"attempt {failures + 1} of {most}, retry of {job_id} ({why}); "
                             f"backoff {duration(wait)}, not before {not_before.isoformat(timespec='seconds')}")


def plan_preemption(session: Session, job_id: uuid.UUID, at: datetime,
                    places: Mapping[str, continuation.OutputPlace] | None = None) -> Plan:
    """The new attempt of a job that was preempted (moving to FAILED with cause "preemption"):
    made whatever its retry policy says, at once (no backoff), with `preemptions` + 1 carried. It
    does not count against the policy's max_attempts; TRAINJOBS_MAX_PREEMPTIONS_PER_JOB bounds it
    instead (a job preempted that often is no longer preemptible, service/capacity/snapshot.py).
    A job that accepted several backends may go on on those that reach its checkpoints (`places`:
    each backend's, lifecycle/continuation.py); else it stays on its backend, and says why."""
    row = session.execute(select(*_COPIED, Job.error, Job.attempt, Job.retry_of, Job.accepts, Job.wish)
                          .where(Job.id == job_id)).one_or_none()
    if row is None or not isinstance(row.compiled, dict):
        return Plan()
    new = _next_attempt(row, job_id, at, not_before=None, waiting=None)
    new["preemptions"] = (row.preemptions or 0) + 1
    goes_on = continuation.plan(row.backend, row.demand, row.accepts, row.wish, places or {})
    where = f"; {goes_on.words}" if goes_on.words else ""
    if goes_on.words:
        new.update(backend=goes_on.backend, demand=goes_on.demand, accepts=goes_on.accepts, wish=goes_on.wish,
                   placement=goes_on.words[:500])
    return Plan(note=f"; requeued as job {new['id']} (preemption {new['preemptions']}; it resumes from its "
                     f"checkpoints{where})", row=new, labels=dict(row.labels or {}),
                first_reason=f"attempt {new['attempt']}, requeued after job {job_id} was preempted "
                             f"(preemption {new['preemptions']}); it resumes from its checkpoints{where}")


def _next_attempt(row, job_id: uuid.UUID, at: datetime, *, not_before: datetime | None,
                  waiting: str | None) -> dict[str, Any]:
    """The row of the attempt after `row`: a job of its own that writes (and resumes from) the
    first attempt's output directory."""
    first = row.retry_of or job_id
    new_id = uuid.uuid4()
    compiled = dict(row.compiled, output_of=str(first))
    custom_job = dict(compiled["custom_job"])
    custom_job["labels"] = {**(custom_job.get("labels") or {}), JOB_ID_LABEL: str(new_id)}
    compiled["custom_job"] = custom_job
    new = {c.key: getattr(row, c.key) for c in _COPIED}
    new.update(id=new_id, compiled=compiled, state=JobState.QUEUED.value, created_at=at, updated_at=at,
               attempt=row.attempt + 1, retry_of=first, not_before=not_before, waiting_reason=waiting)
    return new


def insert_attempt(session: Session, p: Plan, failed_id: uuid.UUID, event: Mapping[str, Any]) -> None:
    """Write the attempt `p` plans (p.row set) through the job-row writer, as a submit is
    written: its row, labels, first event (`event`: Engine.creation_event) and cost row."""
    if p.row is None:
        raise ValueError("this plan makes no new attempt")
    # The same CustomJob costs the same: team budgets count the attempt at the failed one's estimate.
    cost = session.execute(select(_COSTS).where(_COSTS.c.job_id == failed_id)).mappings().first()
    cost_row = None if cost is None else {
        **{k: jobrows.encode(v) if isinstance(_COSTS.c[k].type, JSON) else v for k, v in cost.items()},
        "job_id": p.row["id"]}
    jobrows.insert_job(session, jobrows.job_row(p.row), p.labels or {}, event, cost_row)
