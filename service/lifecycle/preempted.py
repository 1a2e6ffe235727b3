"""How a preempted job ends, in the lifecycle's words (the engine applies it).

The controller records a preemption before it stops the job (Engine.request_preemption:
preempt_requested_at, preempted_for, preempt_reason). Whatever the backend then reports (FAILED,
CANCELLED, a signal exit), the job did not fail: unless it SUCCEEDED first, it ends FAILED with
error.cause "preemption" and gets a new attempt whatever its retry policy says
(retries.plan_preemption). A Slurm job that Slurm itself preempted (error.cause "preemption",
error.preempted_by naming its backend, e.g. a Slurm cluster's) takes the same path. A member's
cancel wins: a job in CANCELLING ends as the cancel ends it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.lifecycle.states import TERMINAL, JobState

S = JobState
# What a preemption may stop: a launched job still running (a cancel under way stops it anyway).
STOPPABLE = [S.QUEUED.value, S.PENDING.value, S.RUNNING.value, S.PAUSED.value, S.UPDATING.value]
REASON_CHARS = 500


def kind_and_why(row: Any) -> tuple[str | None, str]:
    """A preemption's kind (jobs.preempt_kind) and why (jobs.preempt_reason). A row written
    before the kind had its column kept it in the reason as "<kind>: <why>" (migration 0016
    splits those; this reads one that was not)."""
    if row.preempt_kind is not None:
        return row.preempt_kind, row.preempt_reason or ""
    kind, sep, why = (row.preempt_reason or "").partition(": ")
    return (kind, why) if sep and kind in ("reclaim", "priority") else (None, row.preempt_reason or "")


@dataclass(frozen=True)
class Ending:
    reason: str
    error: dict[str, Any]


def for_job_words(shown: Any, for_job: Any) -> str:
    """Who a job was preempted for, in the words its own team reads: the job's id when it is
    that team's, else only that it is another team's (a member never learns another team's job
    ids: the queue shows them without id either)."""
    return f"job {shown}" if shown is not None else ("another team's job" if for_job else "a waiting job")


def ended(row: Any, current: JobState, dst: JobState | None, error: dict | None,
          for_own_team: bool = True) -> Ending | None:
    """The preemption's ending of a job moving from `current` to `dst` as its backend reported it
    (`error`: the backend's, bounded), or None when the move is not a preemption's end. `row`
    carries preempt_requested_at, preempted_for and preempt_reason. `for_own_team`: the job it
    was preempted for is of the same team (else its id is not this team's to read: the error
    says "another team's job", and the reason names that team)."""
    if dst is None or dst not in TERMINAL or dst == S.SUCCEEDED or current == S.CANCELLING:
        return None
    # Preempted by the backend's own scheduler (a Slurm cluster's): its error names who.
    by = error.get("preempted_by") if isinstance(error, dict) and error.get("cause") == "preemption" else None
    by_backend = isinstance(by, str) and by not in ("", "trainjobs")
    if row.preempt_requested_at is None and not by_backend:
        return None
    if row.preempt_requested_at is not None:
        kind, why = kind_and_why(row)
        for_job = str(row.preempted_for) if row.preempted_for and for_own_team else None
        message = f"preempted for {for_job_words(for_job, row.preempted_for)} ({why})"
    else:
        kind, for_job = str(by), None
        message = f"preempted by its backend's own scheduler ({by})" + (
            f": {error.get('message')}" if isinstance(error, dict) and error.get("message") else "")
    out: dict[str, Any] = {"cause": "preemption", "message": message, "for_job": for_job, "kind": kind}
    if by_backend:
        out["preempted_by"] = by
    if error:
        out["backend_error"] = error
    return Ending(message, out)
