"""The simulated backend: each job is a timer of the length it names (labels.py), and no process
starts. Everything else is real: the controller admits, launches, polls, cancels and preempts it,
the engine writes its states and events, the queue shares its capacity (the SharesCapacity role).
For benchmarks at a scheduler's scale (Kueue's 15,000 jobs) and faster-than-real-time replays
(TRAINJOBS_SIM_SPEED); docs/sim.md.

A job's run is its backend reference (runs.py): a poll reads nothing but the handles it is given
and the clock, so a pass over 15,000 running jobs does no I/O, and a restarted controller follows
every job from the rows alone. The one thing held in memory is a preemption (or cancel) asked of
the backend and not yet reported: the controller sends a preemption once per term, so a new
controller sends it again, and a cancel is a CANCELLING job, which every poll sees."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.backends.sim import labels, logs
from service.backends.sim.runs import SimRun, at, parse
from service.backends.sim.settings import SimSettings
from service.core.errors import Problem
from service.jobspec import CompiledJob
from service.lifecycle.protocol import (
    Backend,
    Capabilities,
    JobHandle,
    LaunchView,
    LogPage,
    Observation,
    PermanentBackendError,
    SubmitResult,
    default_launch_view,
)
from service.lifecycle.states import JobState

S = JobState
# The chief is the first replica of pool 0 in Vertex's naming, which the compiler always makes: a
# failed job names it without reading the job's compiled spec (a poll reads nothing per job).
CHIEF = "workerpool0-0"
# A stop reported this many passes ago and not reported again is forgotten: the engine applied it
# (the job is no longer polled) or will hear it from the job's CANCELLING state or a resent preemption.
FORGET_AFTER_PASSES = 3


@dataclass
class _Stop:
    at_ms: int
    by: str                        # runs.STOPS
    reported: int | None = None    # the pass that last reported it


class SimBackend(Backend):
    name = "sim"

    def __init__(self, settings: SimSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.capabilities = Capabilities(bulk_poll=True, max_running=settings.max_running_jobs, preempts=True,
                                         runs_on="the simulator (no process runs)")
        self._clock = clock
        self._stops: dict[uuid.UUID, _Stop] = {}
        self._passes = 0

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- the API's -----------------------------------------------------------------------------
    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        return labels.problems(compiled, self.settings)

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        view = default_launch_view(compiled)
        asked = labels.asked(compiled, self.settings)
        view.resources["sim"] = (f"a timer of {asked.duration_seconds} s at speed {self.settings.speed:g}, "
                                 f"then the chief exits with status {asked.exit_code}; no process runs")
        return view

    # -- the controller's ------------------------------------------------------------------------
    def begin_pass(self) -> None:
        self._passes += 1
        old = [job for job, stop in self._stops.items()
               if stop.reported is not None and self._passes - stop.reported > FORGET_AFTER_PASSES]
        for job in old:
            del self._stops[job]

    def stop_controller(self) -> None:
        self._stops.clear()   # the next controller sends its preemptions again

    def submit(self, job: JobHandle) -> SubmitResult:
        # Checked at submit; checked again here because the settings may have changed since (a
        # lower TRAINJOBS_SIM_MAX_DURATION_SECONDS): the job fails saying so, it is never shortened.
        problems = labels.problems(job.compiled, self.settings)
        if problems:
            raise PermanentBackendError("; ".join(f"{p.field}: {p.message}: {p.fix}" for p in problems),
                                        code="invalid_sim_labels")
        asked = labels.asked(job.compiled, self.settings)
        run = SimRun(self._now_ms(), round(asked.duration_seconds * 1000 / self.settings.speed), asked.exit_code)
        return SubmitResult(backend_ref=run.ref, state=S.PENDING, reason=(
            f"a timer of {asked.duration_seconds} s started ({run.run_ms / 1000:g} s at speed "
            f"{self.settings.speed:g}); no process runs"))

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        now = self._now_ms()
        out: list[Observation] = []
        for job in jobs:
            run = parse(job.backend_ref)
            if run is None and job.backend_ref is None:   # a launch attempt that never returned: nothing runs
                if job.state == S.CANCELLING:
                    out.append(Observation(job.id, state=S.CANCELLED, reason="cancelled before it started"))
            elif run is None:
                reason = f"{job.backend_ref!r} is not a reference the sim backend wrote, so it cannot follow the job"
                out.append(Observation(job.id, state=S.FAILED, reason=reason, error={"code": None, "message": reason}))
            else:
                out += self._observe(job, run, now)
        return out

    def _observe(self, job: JobHandle, run: SimRun, now: int) -> list[Observation]:
        stop = self._stops.get(job.id)
        if run.stop_ms is None:
            if stop is not None:
                stop.reported = self._passes
                run = run.stop(stop.at_ms, stop.by)
            elif job.state == S.CANCELLING:   # its cancel was asked of another controller
                run = run.stop(now, "cancelled")
        out = []
        if job.state in (S.QUEUED, S.PENDING):
            out.append(Observation(job.id, state=S.RUNNING, started_at=at(run.start_ms),
                                   reason="its timer runs (simulated replicas)"))
        if run.over_ms <= now:
            out.append(self._ended(job, run))
        return out

    def _ended(self, job: JobHandle, run: SimRun) -> Observation:
        ended = at(run.over_ms)
        if run.stopped:
            if run.stopped_by == "preempted":
                return Observation(job.id, state=S.CANCELLED, reason="preempted: its timer was stopped at once",
                                   ended_at=ended, backend_ref=run.ref, error={
                                       "code": 1, "message": "CANCELLED: the job was preempted", "source": self.name})
            return Observation(job.id, state=S.CANCELLED, reason="cancelled: its timer was stopped at once",
                               ended_at=ended, backend_ref=run.ref)
        if run.exit_code == 0:
            return Observation(job.id, state=S.SUCCEEDED, reason="its timer ran out; every replica exited 0",
                               ended_at=ended, backend_ref=run.ref)
        message = f"The replica {CHIEF} exited with a non-zero status of {run.exit_code}."
        return Observation(job.id, state=S.FAILED, reason=message, ended_at=ended, backend_ref=run.ref,
                           error={"code": run.exit_code, "exit_code": run.exit_code, "message": message,
                                  "replica": CHIEF, "source": self.name})

    def cancel(self, job: JobHandle) -> JobState | None:
        if parse(job.backend_ref) is None:
            return S.CANCELLED   # never launched: nothing runs
        self._stops.setdefault(job.id, _Stop(self._now_ms(), "cancelled"))
        return None   # the next poll reports it

    # -- SharesCapacity ----------------------------------------------------------------------------
    def demand(self, compiled: CompiledJob) -> dict[str, int]:
        return labels.demand(compiled)

    def offered_capacity(self) -> dict[str, int]:
        return dict(self.settings.capacity)

    def preempt(self, job: JobHandle, grace_seconds: float) -> None:
        """Stops the timer at once: a simulated replica has no checkpoint to save, so the grace
        is not waited. The next poll reports the job CANCELLED, and the engine records the
        preemption (FAILED, error.cause "preemption") and its new attempt, as on any backend."""
        if parse(job.backend_ref) is not None:
            self._stops.setdefault(job.id, _Stop(self._now_ms(), "preempted"))

    # -- every process's ---------------------------------------------------------------------------
    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        tasks = [r.task_name for r in job.compiled.replicas]
        logs.check_replica(tasks, replica)
        return logs.page(parse(job.backend_ref), [replica] if replica else tasks, tasks[0], since, limit,
                         self._now_ms())
