"""What the listing says of a launched job that has not ended, besides its state: that Slurm
requeued it (a note, once per restart), and how long its chiefs and workers have been silent."""
from __future__ import annotations

import logging

from service.backends.slurm import log_reader, poller
from service.backends.slurm.runs import SlurmRun
from service.lifecycle.protocol import JobHandle, Observation
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.slurm")
S = JobState


def requeued(job: JobHandle, run: SlurmRun, sj: poller.SlurmJob) -> Observation | None:
    """Slurm put a launched job back in its queue under the same id (a preemption with
    PreemptMode=REQUEUE, a node failure, `scontrol requeue`): not the job's end. It stays in
    its state (RUNNING never goes back to PENDING, lifecycle/states.py) and its history says so
    once per restart (the count seen is kept in state.json); the restarted tasks resume from
    the checkpoints in the same output folder."""
    if not sj.restarts or job.state == S.QUEUED or job.backend_ref != sj.slurm_id:
        return None
    state = run.read_state()
    if state is None or state.get("job_id") != str(job.id):
        return None
    seen = poller.count(state.get("slurm_restarts"))
    if sj.restarts <= seen:
        return None
    state["slurm_restarts"] = sj.restarts
    run.write_state(state)
    now = "waits in Slurm's queue" if sj.waiting else f"is {sj.state.lower()} again"
    note = (f"requeued by Slurm (preempted): Slurm job {sj.slurm_id} went back to its queue under the same id "
            f"and {now} (restart {sj.restarts}; Slurm requeues the same way after a node failure or "
            "`scontrol requeue`); its tasks restart from the checkpoints in its output folder")
    log.warning("job %s: %s", job.id, note)
    return Observation(job.id, note=note)


def silence(job: JobHandle, run: SlurmRun, sj: poller.SlurmJob) -> Observation | None:
    """How long its chiefs and workers have written nothing (Observation.silence), for a
    RUNNING job with a stall timeout. The lifecycle judges it (lifecycle/stalls.py) and
    stops the job through cancel()."""
    if not job.compiled.stall_timeout_seconds or job.state != S.RUNNING or sj.start is None:
        return None
    silent = log_reader.silence(run, job.compiled, sj.start.timestamp())
    return Observation(job.id, silence=silent) if silent is not None else None
