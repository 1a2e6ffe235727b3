"""Following Slurm jobs: one `squeue --json` per pass for all of them, read into one
record per trainjobs job, and Slurm's states mapped onto trainjobs' (facts only: the
lifecycle decides what they mean).

A heterogeneous job is listed once per component (job ids N, N+1, ...; het_job_id N).
Its state is the leader's, unless a component ended worse (a node failure or an
out-of-memory kill shows on the component it hit)."""
from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from service.backends.slurm.script import job_id_of
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.slurm")
S = JobState

WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SPECIAL_EXIT"}
ENDED_BADLY = ("NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "PREEMPTED", "TIMEOUT", "DEADLINE", "FAILED")
ENDED = {"COMPLETED", "CANCELLED", *ENDED_BADLY}

# google.rpc codes, as the other backends report them (4: DEADLINE_EXCEEDED, 14: UNAVAILABLE, 8: RESOURCE_EXHAUSTED).
_WHY = {
    "TIMEOUT": (4, "ran past its time limit{limit} and was stopped by Slurm"),
    "DEADLINE": (4, "reached its deadline and was stopped by Slurm"),
    "NODE_FAIL": (14, "lost a node: Slurm reported a node failure"),
    "BOOT_FAIL": (14, "could not start: a node failed to boot"),
    "OUT_OF_MEMORY": (8, "was killed for using more memory than it was given (OUT_OF_MEMORY)"),
    "FAILED": (None, "failed"),
}


@dataclass(frozen=True)
class SlurmJob:
    slurm_id: str            # the het job's id (its leader's)
    name: str
    state: str               # Slurm's job_state
    reason: str              # state_reason (why it waits, or why it ended)
    exit_code: int | None    # the batch script's raw wait status
    nodes: tuple[str, ...]   # per component, as squeue prints them (n[1-2])
    start: datetime | None
    end: datetime | None
    time_limit: int | None   # minutes
    worst: str               # the worst component state (== state unless one ended worse)
    restarts: int = 0        # how often Slurm requeued it under this id (restart_cnt: a preemption, a node failure)
    preempted_at: datetime | None = None   # when Slurm chose it for preemption (preempt_time; 0 when never)

    @property
    def preempted(self) -> bool:
        """Slurm preempted this run: it ended PREEMPTED (no grace), or Slurm chose it for a
        preemption (preempt_time) during this run and it ended within its grace time: with a
        GraceTime the tasks get SIGTERM, a trainer saves its checkpoint and exits 143, the batch
        script ends the job, and Slurm records FAILED (and never requeues a job that ended)."""
        if self.final_state == "PREEMPTED":
            return True
        during = self.preempted_at is not None and (self.start is None or self.preempted_at >= self.start)
        return during and self.final_state not in ("COMPLETED", "CANCELLED")

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.worst in ENDED_BADLY and self.state not in ("RUNNING", "COMPLETING")

    @property
    def final_state(self) -> str:
        return self.worst if self.worst in ENDED_BADLY else self.state


def _time(value) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int) and value > 0 else None


def count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def key(job_id: object, uid: int | None) -> str:
    """A listing's key: a trainjobs job id and the user its Slurm job runs as."""
    return f"{job_id}@{uid}"


def parse(data: dict, uids: Collection[int] | None = None) -> dict[str, SlurmJob]:
    """key(trainjobs job id, user) -> its Slurm job, from `squeue --json`: only jobs of the
    users trainjobs submits as (`uids`; None: any), keyed by user too, so another user of the
    cluster (another team's, whose tasks may call sbatch) cannot pass a job of theirs off as
    one of ours by its name: the backend looks a job up under its own team's user. Should two
    of one user carry one job's name (never made by trainjobs), the lower id wins, the same
    every pass."""
    comps: dict[int, list[dict]] = {}
    for j in data.get("jobs") or []:
        name = j.get("name") or ""
        if job_id_of(name) is None or (uids is not None and j.get("user_id") not in uids):
            continue
        leader = j.get("het_job_id") or j.get("job_id")
        comps.setdefault(int(leader), []).append(j)
    out: dict[str, SlurmJob] = {}
    for leader_id in sorted(comps):
        parts = sorted(comps[leader_id], key=lambda j: j.get("het_job_offset") or 0)
        lead = parts[0]
        worst = next((s for s in ENDED_BADLY if any(p.get("job_state") == s for p in parts)), lead.get("job_state"))
        job = SlurmJob(slurm_id=str(leader_id), name=lead["name"], state=lead.get("job_state") or "",
                       reason=lead.get("state_reason") or "", exit_code=lead.get("exit_code"),
                       nodes=tuple(p.get("nodes") or "" for p in parts), start=_time(lead.get("start_time")),
                       end=_time(lead.get("end_time")),
                       time_limit=lead.get("time_limit") if isinstance(lead.get("time_limit"), int) else None,
                       worst=worst or "",
                       restarts=count(lead.get("restart_cnt")),
                       preempted_at=_time(max((p.get("preempt_time") or 0 for p in parts), default=0)))
        jid = job_id_of(job.name)
        if jid is None:
            continue  # never: names without our prefix were left out above
        jid = key(jid, lead.get("user_id"))
        if jid in out:
            log.warning("job %s: two Slurm jobs carry its name (%s, %s); following %s", jid, out[jid].slurm_id,
                        job.slurm_id, out[jid].slurm_id)
            continue
        out[jid] = job
    return out


def ended_error(job: SlurmJob) -> tuple[str, dict]:
    """(reason, error) for a job Slurm ended other than COMPLETED or CANCELLED; the backend
    adds the failing task's exit record and log tail where it has them (not to a preemption:
    its tasks ended as they were told to)."""
    state = job.final_state
    if job.preempted:
        return _preempted_error(job)
    code, what = _WHY.get(state, (None, f"ended in Slurm state {state}"))
    status = job.exit_code if isinstance(job.exit_code, int) else None
    detail = f" (reason {job.reason}" + (f", batch script status {status >> 8}" if status is not None and
                                        status >= 256 else "") + ")" if job.reason and job.reason != "None" else ""
    limit = f" of {job.time_limit} min" if job.time_limit else ""
    message = f"{state}: Slurm job {job.slurm_id} {what.format(limit=limit)}{detail}"
    error = {"code": code, "message": message, "source": "slurm", "slurm_state": state,
             "slurm_reason": job.reason, "slurm_job_id": job.slurm_id}
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        error["lost"] = True            # the retry policy treats it as a replica gone without a status
    return message, error


def _preempted_error(job: SlurmJob) -> tuple[str, dict]:
    """Slurm's own preemption (PreemptMode=CANCEL, REQUEUE of a job not requeueable, or any
    mode with a GraceTime the tasks ended within): a preemption like trainjobs' own, not the
    job's failure; the lifecycle gives it a new attempt that resumes from the checkpoints in
    the same output folder."""
    state, ref = job.final_state, job.slurm_id
    when = f" at {job.preempted_at.isoformat()}" if job.preempted_at else ""
    if state == "PREEMPTED":
        how = "its tasks were stopped"
    else:
        status = job.exit_code if isinstance(job.exit_code, int) else None
        code = f", batch script status {status >> 8}" if status is not None and status >= 256 else ""
        how = f"its tasks had SIGTERM and ended within the grace time (Slurm says {state}{code})"
    message = f"PREEMPTED: Slurm job {ref} was preempted by Slurm{when} (a higher-priority job took its nodes); {how}"
    return message, {"code": 14, "message": message, "source": "slurm", "slurm_state": state,
                     "slurm_reason": job.reason, "slurm_job_id": ref, "cause": "preemption", "preempted_by": "slurm",
                     "preempted_at": job.preempted_at.isoformat() if job.preempted_at else None}
