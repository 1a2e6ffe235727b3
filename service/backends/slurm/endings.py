"""How a Slurm job ended, in facts for the lifecycle: from squeue's last word on it, from the
cluster's job-completion record, or, when Slurm forgot it, from its run folder's exit records;
with the task that failed first (its exit record and log tail) where one did."""
from __future__ import annotations

from typing import Any

from service.backends.slurm import log_reader, poller
from service.backends.slurm.runs import SlurmRun
from service.jobspec import CompiledJob
from service.lifecycle.protocol import JobHandle, Observation
from service.lifecycle.states import JobState

S = JobState


def ended(job: JobHandle, sj: poller.SlurmJob, run: SlurmRun) -> Observation:
    """A job squeue (or the job-completion record) shows ended, as its Slurm state and run folder say."""
    ref, final = sj.slurm_id, sj.final_state
    # An outcome in state.json: a stall decided by a version of this backend from before the
    # lifecycle judged them all (lifecycle/stalls.py); still reported as it was decided.
    decided = (run.read_state() or {}).get("outcome")
    kw: dict[str, Any] = {"backend_ref": ref, "started_at": sj.start, "ended_at": sj.end}
    if decided:
        return Observation(job.id, state=S(decided["state"]), reason=decided["reason"], **kw,
                           error=with_slurm_fields(decided["error"], final, sj.reason, ref))
    if final == "COMPLETED":
        return Observation(job.id, state=S.SUCCEEDED, reason=f"Slurm job {ref} completed: every chief and "
                                                             "worker task exited 0", **kw)
    preempted = (run.read_state() or {}).get("preempt_sent")
    if preempted and job.state != S.CANCELLING:
        message = (f"PREEMPTED: Slurm job {ref} was stopped by trainjobs for another job (SIGTERM at "
                   f"{preempted}, then killed if still running after the grace); Slurm says {final}")
        return Observation(job.id, state=S.FAILED, reason=message, **kw, error={
            "code": 14, "message": message, "cause": "preemption", "preempted_by": "trainjobs",
            "source": "slurm", "slurm_state": final, "slurm_reason": sj.reason or None, "slurm_job_id": ref})
    if final == "CANCELLED":
        how = "by request (scancel)" if job.state == S.CANCELLING else "in Slurm, outside trainjobs (scancel)"
        return Observation(job.id, state=S.CANCELLED, reason=f"Slurm job {ref} was cancelled {how}",
                           error=None if job.state == S.CANCELLING else
                           {"code": 1, "message": f"CANCELLED: Slurm job {ref} was cancelled outside trainjobs",
                            "source": "slurm", "slurm_state": "CANCELLED", "slurm_reason": sj.reason or None,
                            "slurm_job_id": ref}, **kw)
    reason, error = poller.ended_error(sj)
    if error.get("cause") != "preemption":
        blame(run, job.compiled, error)
    if error.get("replica"):
        reason += f"; first to fail: {error['replica']} ({error['message'].split('. ', 1)[0]})"
    return Observation(job.id, state=S.FAILED, reason=reason, error=error, **kw)


def blame(run: SlurmRun, compiled: CompiledJob, error: dict) -> None:
    """The task that failed first (its exit record and last log lines), when one did."""
    exits = [(rec.get("ended_at") or "~", r.pool, r.index, r.task_name, rec)
             for r in compiled.replicas if (rec := run.task_record(r.task_name, "exit")) is not None
             and rec.get("exit_code") not in (0, None) and not rec.get("terminated_by")]
    if not exits:
        batch = log_reader.batch_tail(run)
        if batch:   # no task says why: what srun and the batch script said (e.g. no such Python)
            error["batch_output_tail"] = batch
            error["message"] += f". Last lines of {run.batch_output.name}:\n" + "\n".join(batch)
        return
    *_, task, rec = min(exits, key=lambda e: e[:3])
    code, sig = rec.get("exit_code"), rec.get("signal")
    tail = log_reader.tail(run, task)
    error.update(replica=task, exit_code=code if isinstance(code, int) and code >= 0 else None, signal=sig,
                 log_tail=tail, node=rec.get("node"))
    what = f"The replica {task} exited with a non-zero status of {code}." if not sig else \
        f"The replica {task} was killed by {sig}."
    error["message"] = what + " " + error["message"] + (
        (" Last lines of its log:\n" + "\n".join(tail)) if tail else "")


def from_exit_records(job: JobHandle, run: SlurmRun, ref: str) -> Observation:
    """A job Slurm no longer lists and has no completion record of: as its tasks' exit records say."""
    tasks = log_reader.tasks_of(job.compiled)
    trainers = [r.task_name for r in job.compiled.replicas if r.tf_role in ("chief", "worker", "evaluator")]
    exits = {t: run.task_record(t, "exit") for t in tasks}
    gone = (f"Slurm no longer lists job {ref} (it ended longer ago than the cluster's MinJobAge while "
            "no controller followed it)")
    if job.state == S.CANCELLING:
        return Observation(job.id, state=S.CANCELLED, reason=gone)
    if all((exits.get(t) or {}).get("exit_code") == 0 for t in trainers):
        return Observation(job.id, state=S.SUCCEEDED, reason=gone + "; every chief and worker task exited 0")
    error = {"code": None, "message": gone, "source": "slurm", "slurm_state": None, "slurm_reason": None,
             "slurm_job_id": ref}
    blame(run, job.compiled, error)
    return Observation(job.id, state=S.FAILED, reason=gone, error=error)


def with_slurm_fields(error: dict | None, state: str | None, reason: str | None, ref: str) -> dict | None:
    """An outcome this service decided (a stall), with the Slurm fields every error carries
    (docs/slurm.md) where the decision did not write them."""
    if error is None:
        return None
    return {"slurm_state": state, "slurm_reason": reason or None, "slurm_job_id": ref, **error}
