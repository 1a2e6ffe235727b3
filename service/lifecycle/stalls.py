"""The one judge of stalls, for every backend: a training replica (chief, worker) of a
RUNNING job silent for longer than the job's `scheduling.stall_timeout_seconds` fails the
job, naming the replica, with one message and one code. Backends only report how long they
saw their replicas silent (Observation.silence: local and Slurm from their log files' last
writes, Vertex over the Cloud Logging reads it made); the job is
stopped (backend.cancel) before it is failed, so a job never reads FAILED while its
replicas may still hold machines because a cancel did not go out."""
from __future__ import annotations

import dataclasses

from service.lifecycle.protocol import JobHandle, Observation
from service.lifecycle.states import JobState

STALL_CODE = 4   # google.rpc.Code DEADLINE_EXCEEDED


def judge(handle: JobHandle, obs: Observation) -> Observation | None:
    """The FAILED observation a stall turns `obs` into; None: no stall (or no news)."""
    silent = obs.silence
    if not silent or obs.state not in (None, JobState.RUNNING) or handle.state != JobState.RUNNING:
        return None
    limit = handle.compiled.stall_timeout_seconds
    seconds = silent.get("seconds")
    if not limit or not isinstance(seconds, (int, float)) or seconds <= limit:
        return None
    replica = str(silent.get("replica") or "?")
    message = (f"replica {replica} wrote no output and reported no progress for {limit:g} s (its "
               f"stall_timeout_seconds; silent for {seconds:.0f} s of logs read); the job was stopped")
    return dataclasses.replace(obs, state=JobState.FAILED, reason=message,
                               error={"code": STALL_CODE, "message": message, "replica": replica,
                                      "source": "trainjobs"})
