"""The local backend: every replica of the compiled cluster is an OS process on
this machine, with the environment Vertex AI would give it.

Last in a job's life, and the only part the service talks to: LocalBackend answers
the lifecycle's calls (submit, poll, cancel, read_logs, launch_view) and reports
facts as Observations; it decides no job state. The work is in the modules it joins,
read in the order of a job's life:

    settings.py     the backend's slice of the settings (LocalSettings)
    runs.py         a run: its record on disk (RunState, state.json) and in memory (Run)
    launcher.py     starting a job: run folder, uid, sandbox, one wrapper per replica
    supervisor.py   following it: exits, outcome, stalls, stopping, cleanup, restarts
    backend.py      this file: the Backend protocol on top of the two

and below them: rundir.py (the run folder), sandbox.py/nsholder.py/cgroup.py/
isolation.py (the sandbox), wrapper.py (one replica), processes.py (finding and
signalling them), resources.py (the job view's resources).

Truth lives on disk, so a restarted service follows its jobs again: each replica
runs under a small wrapper that leads its own process group, copies the output
to a log file and records the exit status in a file.

Only the elected controller runs replicas (service.lifecycle.controller): its
loop for this backend calls submit(), poll() and cancel(), one at a time; the
supervisor's watcher thread reaps processes and stops clusters quickly. One lock
(the supervisor's) guards all of it; none of it touches the database.

Replicas are bound to the controller's host: the backend reference is
`<host>:<run folder>`, and a controller on another host leaves such jobs alone
(it reports nothing) rather than calling them gone."""
from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Sequence

from service.backends import progress, replica_logs
from service.backends.local.launcher import Launcher
from service.backends.local.rundir import RunDir
from service.backends.local.runs import Run, host_id, parse_ref
from service.backends.local.settings import LocalSettings
from service.backends.local.supervisor import Supervisor
from service.core.errors import Invalid, Problem
from service.jobspec import CompiledJob, Replica
from service.lifecycle.protocol import (
    Backend,
    Capabilities,
    JobHandle,
    LaunchView,
    LogPage,
    Observation,
    SubmitResult,
    TransientBackendError,
)
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.local")
S = JobState


class LocalBackend(Backend):
    name = "local"

    def __init__(self, settings: LocalSettings):
        self.settings = settings
        self.work_dir = settings.work_dir
        # 0 holds every local job in QUEUED (maintenance, or a service that only stores jobs).
        self.capabilities = Capabilities(host_bound=True, max_running=max(0, settings.max_running_jobs),
                                         runs_on="this machine", preempts=True,
                                         output_root=str(settings.shared_output_dir or settings.work_dir),
                                         shared_output=str(settings.shared_output_dir) if settings.shared_output_dir
                                         else None)
        self.launcher = Launcher(settings)
        self.supervisor = Supervisor(settings, isolate=self.launcher.isolate, uids=self.launcher.uids)

    # -- lifecycle -----------------------------------------------------------------

    def start_client(self) -> None:
        """Every process: it stores jobs and reads logs; the controller's loop
        launches, follows and cancels the replicas."""
        self.launcher.prepare()

    def start_controller(self) -> None:
        self.supervisor.start()

    def stop_controller(self) -> None:
        self.supervisor.stop()

    def close(self) -> None:
        self.stop_controller()

    # -- protocol --------------------------------------------------------------------

    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        return self.launcher.check_launchable(compiled)

    def submit(self, job: JobHandle) -> SubmitResult:
        sup = self.supervisor
        with sup.lock:
            run = sup.runs.get(job.id) or sup.load(self._run_dir(job))
            if run is None:
                sharing = self._sharing_output(job)
                if sharing is not None:
                    return SubmitResult(nothing_launched=True, reason=(
                        f"waiting for the replicas of job {sharing.job_id} to stop: this retry uses the same "
                        "output (checkpoint) directory"))
                try:
                    # Launched before a crash that the database never heard of: followed, not launched again.
                    run = sup.load(RunDir.of(self.work_dir, job.id)) or self._launch(job)
                except OSError as e:  # no run folder, ports or uids: the next pass tries again
                    raise TransientBackendError(f"could not prepare the local run: {e}") from e
            return SubmitResult(backend_ref=run.ref, state=S.PENDING,
                                reason=f"starting {len(run.replicas)} replica processes in {run.dir.path}")

    def _launch(self, job: JobHandle) -> Run:
        run = self.launcher.launch(job, self.supervisor.runs)
        if run.outcome is not None:
            # Replicas started before the failure would wait forever for the missing one
            # and hold a slot of the queue: stop them like any failed cluster.
            self.supervisor.begin_stop(run)
        self.launcher.launched(run)
        return run

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        out: list[Observation] = []
        sup = self.supervisor
        with sup.lock:
            sup.polls += 1
            for job in jobs:
                if self._elsewhere(job):
                    continue  # its processes live on another host: only a controller there may say
                run = sup.runs.get(job.id) or sup.load(self._run_dir(job))
                if run is None:
                    if job.state == S.CANCELLING:
                        out.append(Observation(job.id, state=S.CANCELLED, reason="cancelled before it started"))
                    else:
                        out.append(self._missing(job))
                    continue
                run.claimed = True
                try:
                    sup.tick(run)
                    out += self._observe(run, job)
                except Exception:
                    log.exception("job %s: could not follow its local run %s", job.id, run.ref)
        return out

    def cancel(self, job: JobHandle) -> JobState | None:
        if job.backend_ref and self._elsewhere(job):
            log.warning("job %s: its replicas run on host %s; a controller there stops them", job.id,
                        parse_ref(job.backend_ref)[0])
            return None
        sup = self.supervisor
        with sup.lock:
            run = sup.runs.get(job.id) or sup.load(self._run_dir(job))
            if run is None:
                return S.CANCELLED  # never launched here
            sup.tick(run)
            if run.outcome is None and not run.state.cancel_requested_at:
                sup.request_cancel(run)
            if job.state != S.CANCELLING:
                # The lifecycle ends the job itself (a stall): no poll will ask for this run's
                # outcome, so the watcher may let the run go once nothing of it is left.
                run.reported = True
            return None

    def demand(self, compiled: CompiledJob) -> dict[str, int]:
        """SharesCapacity: one of this machine's cores per replica process, and the GPUs its pools
        ask for (accelerator count x replicas)."""
        gpus = sum(int((p.get("machineSpec") or {}).get("acceleratorCount") or 0) * int(p.get("replicaCount") or 0)
                   for p in (compiled.custom_job_dict.get("jobSpec") or {}).get("workerPoolSpecs") or [] if p)
        return {"core": len(compiled.replicas), **({"gpu": gpus} if gpus else {})}

    def offered_capacity(self) -> dict[str, int]:
        return {"core": os.cpu_count() or 1}

    def preempt(self, job: JobHandle, grace_seconds: float) -> None:
        """SharesCapacity.preempt: stop the run as a cancel does (SIGTERM to every replica's
        process group, SIGKILL after the grace), with the preemption's grace. The trainer saves a
        checkpoint on SIGTERM; the lifecycle records the preemption however the run ends."""
        if job.backend_ref and self._elsewhere(job):
            log.warning("job %s: its replicas run on host %s; a controller there preempts them", job.id,
                        parse_ref(job.backend_ref)[0])
            return
        sup = self.supervisor
        with sup.lock:
            run = sup.runs.get(job.id) or sup.load(self._run_dir(job))
            if run is None:
                return   # nothing of it runs here: the next poll says so
            sup.tick(run)
            if run.outcome is None and not run.state.cancel_requested_at:
                sup.request_cancel(run, grace=grace_seconds, why="preempted")

    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        tasks = [r.task_name for r in job.compiled.replicas if r.tf_role is not None]
        if replica is not None:
            if replica not in tasks:
                raise Invalid.of([Problem("replica", f"this job has no replica {replica!r}",
                                          f"use one of: {', '.join(tasks)}")])
            tasks = [replica]
        rd = self._run_dir(job)
        return replica_logs.read_page({t: rd.log(t) for t in tasks}, since, limit)

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        return self.launcher.view(job_id, compiled, backend_ref)

    # The launcher's answers, under the names tests have used.
    def command_of(self, replica: Replica) -> list[str]:
        return self.launcher.command_of(replica)

    @property
    def sandboxed(self) -> bool:
        """Each job runs in namespaces of its own (root, TRAINJOBS_LOCAL_SANDBOX=namespaces)."""
        return self.launcher.sandboxed

    # -- where a job's run is ------------------------------------------------------------

    def _run_dir(self, job: JobHandle) -> RunDir:
        if job.backend_ref:
            return RunDir(parse_ref(job.backend_ref)[1])
        return RunDir.of(self.work_dir, job.id)

    def _elsewhere(self, job: JobHandle) -> bool:
        if not job.backend_ref:
            return False
        host, _ = parse_ref(job.backend_ref)
        return host is not None and host != host_id()

    def _sharing_output(self, job: JobHandle) -> Run | None:
        """A run of this host still stopping that writes where `job` would: it launches after."""
        if not job.compiled.output_of:
            return None
        mine = str(self.launcher.output_dir(RunDir.of(self.work_dir, job.id), job.compiled, job.id))
        return next((r for r in self.supervisor.runs.values() if not r.gone and r.state.output_dir == mine), None)

    # -- what the lifecycle is told ------------------------------------------------------

    def _observe(self, run: Run, job: JobHandle) -> list[Observation]:
        self._read_progress(run)
        prog = run.progress if run.progress_dirty else None
        run.progress_dirty = False
        out = []
        all_started = all(r.started for r in run.replicas.values())
        if job.state in (S.QUEUED, S.PENDING) and all_started and \
                (run.outcome is None or run.outcome.state != S.CANCELLED):
            reason = "the replica is running" if len(run.replicas) == 1 else f"all {len(run.replicas)} replicas running"
            if run.adopted:
                reason += " (followed again after a service restart)"
            out.append(Observation(job.id, state=S.RUNNING, reason=reason, backend_ref=run.ref,
                                   started_at=run.launched_at))
        elif job.state == S.QUEUED and run.outcome is None:
            out.append(Observation(job.id, state=S.PENDING, backend_ref=run.ref,
                                   reason=f"starting {len(run.replicas)} replica processes in {run.ref}"))
        if run.outcome is not None:
            run.reported = True
            o = run.outcome
            out.append(Observation(job.id, state=o.state, reason=o.reason, error=o.error,
                                   backend_ref=run.ref, ended_at=o.ended_at, progress=prog))
            return out
        if job.state == S.CANCELLING and not run.state.cancel_requested_at:
            self.supervisor.request_cancel(run)  # the service stopped between recording the cancel and sending it
        silent = self.supervisor.silence(run) if job.state == S.RUNNING else None
        if out or prog is not None or job.backend_ref != run.ref:
            if out:
                out[-1] = dataclasses.replace(out[-1], progress=prog, silence=silent)
            else:
                out.append(Observation(job.id, backend_ref=run.ref, progress=prog, silence=silent))
        elif silent is not None:
            out.append(Observation(job.id, silence=silent))   # the lifecycle judges it
        return out

    def _read_progress(self, run: Run) -> None:
        # A chunk per pass while the job runs; all of it once the job has ended, so the
        # final progress (train_end) is never left behind a long line.
        to_end = run.outcome is not None
        for rep in run.replicas.values():
            if rep.tf_role not in ("chief", "evaluator"):
                continue
            path = run.dir.log(rep.task)
            offset = run.progress_offsets.get(rep.task, 0)
            while True:
                start = offset
                for ts, _stream, message, end in replica_logs.read_records(path, offset, replica_logs.READ_CHUNK):
                    offset = end
                    new = progress.update(run.progress, message, ts, rep.tf_role)
                    if new is not None:
                        run.progress, run.progress_dirty = new, True
                if not to_end or offset == start:
                    break
            run.progress_offsets[rep.task] = offset

    def _missing(self, job: JobHandle) -> Observation:
        rd = self._run_dir(job)
        reason = (f"the local run folder {rd.path} is gone, so the job's processes cannot be followed "
                  "(was TRAINJOBS_LOCAL_WORK_DIR changed, or the folder deleted?)")
        return Observation(job.id, state=S.FAILED, reason=reason, error={"code": None, "message": reason})
