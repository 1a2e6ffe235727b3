"""The local backend: every replica of the compiled cluster is an OS process on
this machine, with the environment Vertex AI would give it.

Truth lives on disk (rundir.py), so a restarted service follows its jobs again:
each replica runs under a small wrapper (wrapper.py) that leads its own process
group, copies the output to a log file and records the exit status in a file.

Only the elected controller runs replicas (service.lifecycle.controller): its
loop for this backend calls submit(), poll() and cancel(), one at a time; a
watcher thread reaps processes and stops clusters quickly. One lock guards all
of it; none of it touches the database or decides a job's state (the lifecycle
applies the Observations that poll() returns).

Replicas are bound to the controller's host: the backend reference is
`<host>:<run folder>`, and a controller on another host leaves such jobs alone
(it reports nothing) rather than calling them gone."""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from service.backends import progress
from service.backends.local import (
    cgroup,
    isolation,
    launch,
    logfiles,
    processes,
    sandbox,
)
from service.backends.local import resources as local_resources
from service.backends.local.launch import free_ports  # noqa: F401  (its home before)
from service.backends.local.rundir import RunDir, replica_status
from service.backends.local.runs import (  # noqa: F401 (kept here)
    ReplicaProc,
    Run,
    _iso,
    _now,
    _parse,
    host_id,
    make_ref,
    parse_ref,
)
from service.core.errors import Invalid, Problem
from service.jobspec import CompiledJob, Replica
from service.jobspec.spec import DEFAULT_TRAINER_COMMAND
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

WATCH_INTERVAL = 0.1           # seconds between the watcher's passes
UNCLAIMED_SECONDS = 60.0       # an adopted run no active job claims is stopped after this
LOG_TAIL_LINES = 20
S = JobState


# A replica's address before its job is launched: the port is picked from the free ones then.
UNASSIGNED_ADDRESS = "127.0.0.1:<port chosen at launch>"


class LocalBackend(Backend):
    name = "local"

    def __init__(self, settings):
        self.settings = settings
        self.work_dir = Path(settings.resolved_local_work_dir()).expanduser().resolve()
        # 0 holds every local job in QUEUED (maintenance, or a service that only stores jobs).
        self.capabilities = Capabilities(host_bound=True, max_running=max(0, int(settings.local_max_running_jobs)))
        self.grace = float(settings.local_cancel_grace_seconds)
        self.python = settings.local_python or sys.executable
        self.max_replicas = int(settings.local_max_replicas_per_job)
        self.isolate = bool(settings.local_isolate_replicas) and isolation.isolating()
        self.sandboxed = self.isolate and settings.local_sandbox == "namespaces"
        self.uids = sandbox.UidPool(settings.local_replica_uid_base, settings.local_replica_uid_count)
        self._lock = threading.RLock()
        self._runs: dict[uuid.UUID, Run] = {}
        self._polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------

    def start_client(self) -> None:
        """Every process: it stores jobs and reads logs; the controller's loop
        launches, follows and cancels the replicas."""
        python = shutil.which(self.python) if os.sep not in self.python else self.python
        if not python or not os.access(python, os.X_OK):
            raise ValueError(f"TRAINJOBS_LOCAL_PYTHON={self.python!r} is not an executable Python")
        self.python = python
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # Replicas may pass through (to their own folder) but not list other jobs.
        os.chmod(self.work_dir, 0o711)
        if self.isolate:
            blocked = isolation.unreachable_ancestor(self.work_dir)
            if blocked is not None:
                raise ValueError(
                    f"local replicas run as unprivileged uids and cannot reach the run folder "
                    f"{self.work_dir}: {blocked} is not searchable by others. Use a run folder others "
                    f"may pass through (chmod o+x {blocked}, or set TRAINJOBS_LOCAL_WORK_DIR), or turn "
                    "isolation off with TRAINJOBS_LOCAL_ISOLATE_REPLICAS=false (replicas then run as root)")
            closed = isolation.closed_to_others(self.python)
            if closed is not None:
                raise ValueError(
                    f"local replicas run as unprivileged uids and cannot execute {self.python}: {closed} is "
                    "closed to others (e.g. a Python under root's home). Install with a system Python "
                    "(scripts/install.sh does so as root), point TRAINJOBS_LOCAL_PYTHON at one others may "
                    "run, or turn isolation off with TRAINJOBS_LOCAL_ISOLATE_REPLICAS=false")
        self._check_sandbox()

    def _check_sandbox(self) -> None:
        if not isolation.isolating():
            log.info("local backend: single-user mode (the service is not root): replicas run as this "
                     "user, on this host's network; for other users' jobs run the service as root "
                     "(docs/local.md)")
            return
        if (why := cgroup.available()) is not None:
            log.warning("local backend: jobs get no cgroup (%s): no per-job process limit "
                        "(TRAINJOBS_LOCAL_MAX_PROCESSES_PER_JOB)", why)
        if not self.sandboxed:
            log.warning("LOCAL REPLICAS ARE NOT SANDBOXED: TRAINJOBS_LOCAL_SANDBOX=none or "
                        "TRAINJOBS_LOCAL_ISOLATE_REPLICAS=false, so every job's code shares this host's "
                        "network (database included) and sees its processes; only for a single-user host "
                        "(docs/local.md)")
        else:
            why = sandbox.probe()
            if why is not None:
                raise ValueError(
                    f"local backend: cannot create a job's namespaces on this machine ({why}); run the service "
                    "as root on the host or in a privileged container (CAP_SYS_ADMIN), or, on a single-user "
                    "host only, set TRAINJOBS_LOCAL_SANDBOX=none")

    def _sandbox_readable(self) -> list[Path]:
        """What replicas run from, seen read-only inside the sandbox even where its private
        /tmp would hide it (an install or a checkout under /tmp): the interpreter's
        environment and the code the wrapper and trainer load."""
        return sorted({Path(self.python).parent.parent, Path(__file__).resolve().parents[3]})

    def start_controller(self) -> None:
        with self._lock:
            self._adopt_all()
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="local-backend-watcher", daemon=True)
        self._thread.start()

    def stop_controller(self) -> None:
        # Replicas keep running: the next controller on this host follows them again (docs/local.md).
        self._stop.set()
        if self._thread:
            self._thread.join(5)
            self._thread = None
        with self._lock:
            self._runs.clear()

    def close(self) -> None:
        self.stop_controller()

    # -- protocol --------------------------------------------------------------------

    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        problems = []
        if any(r.tf_role is None for r in compiled.replicas):
            problems.append(Problem(
                "reduction_server", "Reduction Server pools cannot run on the local backend "
                "(Google's reducer image needs Vertex AI and GPU workers using NCCL)",
                'remove it for this job with "overrides": {"reduction_server": null}, '
                'or launch with "backend": "vertex"'))
        if len(compiled.replicas) > self.max_replicas:
            problems.append(Problem(
                "workers.replica_count", f"{len(compiled.replicas)} replicas; the local backend runs "
                f"at most {self.max_replicas} processes per job",
                "use fewer workers, or raise TRAINJOBS_LOCAL_MAX_REPLICAS_PER_JOB"))
        return problems

    def submit(self, job: JobHandle) -> SubmitResult:
        with self._lock:
            run = self._runs.get(job.id) or self._load(job)
            if run is None:
                sharing = self._sharing_output(job)
                if sharing is not None:
                    return SubmitResult(nothing_launched=True, reason=(
                        f"waiting for the replicas of job {sharing.job_id} to stop: this retry uses the same "
                        "output (checkpoint) directory"))
                try:
                    run = self._launch(job)
                except OSError as e:  # no run folder, ports or uids: the next pass tries again
                    raise TransientBackendError(f"could not prepare the local run: {e}") from e
            return SubmitResult(backend_ref=run.ref, state=S.PENDING,
                                reason=f"starting {len(run.replicas)} replica processes in {run.dir.path}")

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        out: list[Observation] = []
        with self._lock:
            self._polls += 1
            for job in jobs:
                if self._elsewhere(job):
                    continue  # its processes live on another host: only a controller there may say
                run = self._runs.get(job.id) or self._load(job)
                if run is None:
                    if job.state == S.CANCELLING:
                        out.append(Observation(job.id, state=S.CANCELLED, reason="cancelled before it started"))
                    else:
                        out.append(self._missing(job))
                    continue
                run.claimed = True
                try:
                    self._tick(run)
                    out += self._observe(run, job)
                except Exception:
                    log.exception("job %s: could not follow its local run %s", job.id, run.ref)
        return out

    def cancel(self, job: JobHandle) -> JobState | None:
        if self._elsewhere(job):
            log.warning("job %s: its replicas run on host %s; a controller there stops them", job.id,
                        parse_ref(job.backend_ref)[0])
            return None
        with self._lock:
            run = self._runs.get(job.id) or self._load(job)
            if run is None:
                return S.CANCELLED  # never launched here
            self._tick(run)
            if run.outcome is None and not run.state.get("cancel_requested_at"):
                self._request_cancel(run)
            return None

    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        tasks = [r.task_name for r in job.compiled.replicas if r.tf_role is not None]
        if replica is not None:
            if replica not in tasks:
                raise Invalid.of([Problem("replica", f"this job has no replica {replica!r}",
                                          f"use one of: {', '.join(tasks)}")])
            tasks = [replica]
        rd = self._run_dir(job)
        return logfiles.read_page({t: rd.log(t) for t in tasks}, since, limit)

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        """Exactly what each replica gets here (env_of): its 127.0.0.1 address and the run's
        own folders, read from the run's state.json once launched. Before that (or for a run
        on another host, whose folder is not here) the ports are not chosen yet and say so."""
        host, path = parse_ref(backend_ref) if backend_ref else (None, None)
        rd = RunDir(path) if path is not None else RunDir.of(self.work_dir, job_id)
        state = None
        if backend_ref and (host is None or host == host_id()):
            try:
                state = rd.read_state()
            except (OSError, ValueError):
                state = None
        replicas = (state or {}).get("replicas") or {}
        if all(r.task_name in replicas for r in compiled.replicas) and state is not None:
            addresses = {r.task_name: replicas[r.task_name]["address"] for r in compiled.replicas}
            output_dir = state.get("output_dir")
        else:
            addresses = {r.task_name: UNASSIGNED_ADDRESS for r in compiled.replicas}
            output_dir = str(self._output_dir(rd, compiled))
        return LaunchView(compiled.custom_job_dict,
                          {r.task_name: self.env_of(job_id, compiled, r, addresses, output_dir, rd)
                           for r in compiled.replicas},
                          local_resources.view(compiled, str(output_dir)),
                          {r.task_name: replica_status(rd, r.task_name) for r in compiled.replicas} if state else {})

    def _run_dir(self, job: JobHandle) -> RunDir:
        if job.backend_ref:
            return RunDir(parse_ref(job.backend_ref)[1])
        return RunDir.of(self.work_dir, job.id)

    def _elsewhere(self, job: JobHandle) -> bool:
        if not job.backend_ref:
            return False
        host, _ = parse_ref(job.backend_ref)
        return host is not None and host != host_id()

    # -- launching ---------------------------------------------------------------------

    def _output_dir(self, rd: RunDir, compiled: CompiledJob) -> Path:
        """The run's own output folder; for a retry attempt, its first attempt's, so the
        trainer finds the checkpoints there and resumes (Vertex: the same base output directory)."""
        return RunDir.of(self.work_dir, uuid.UUID(compiled.output_of)).output if compiled.output_of else rd.output

    def _sharing_output(self, job: JobHandle) -> Run | None:
        """A run of this host still stopping that writes where `job` would: it launches after."""
        if not job.compiled.output_of:
            return None
        mine = str(self._output_dir(RunDir.of(self.work_dir, job.id), job.compiled))
        return next((r for r in self._runs.values() if not r.gone and r.state.get("output_dir") == mine), None)

    def command_of(self, replica: Replica) -> list[str]:
        """The template's command and args; the trainer image's entrypoint when there
        is no command. `python` is this environment's interpreter."""
        command = list(replica.command) or list(DEFAULT_TRAINER_COMMAND)
        if command[0] in ("python", "python3"):
            command[0] = self.python
        return command + list(replica.args)

    def env_of(self, job_id: uuid.UUID, compiled: CompiledJob, replica: Replica,
               addresses: dict[str, str], output_dir: str | None, rd: RunDir | None = None) -> dict[str, str]:
        """Nothing of the service's own environment: a minimal base, then exactly what
        Vertex would set (TF_CONFIG, CLUSTER_SPEC, AIP_*) and the template's env."""
        rd = rd or RunDir.of(self.work_dir, job_id)
        env = isolation.base_env(self.python, rd.home, rd.tmp)
        env.update(compiled.env(replica, addresses, output_dir))
        env[processes.MARKER] = processes.marker_value(job_id, replica.task_name)
        return env

    def _launch(self, job: JobHandle) -> Run:
        return launch.launch(self, job)

    # -- following ---------------------------------------------------------------------

    def _tick(self, run: Run) -> None:
        """Reap, notice exits, decide the outcome, stop what must stop."""
        self._refresh(run)
        now = time.monotonic()
        if run.outcome is None:
            self._decide(run)
        if run.stopping and not run.gone:
            if now >= run.stop_deadline:
                self._signal(run, signal.SIGKILL)
                run.killed = True
            if self._all_gone(run):
                run.gone = True
                if run.uid is not None:
                    isolation.reclaim([run.dir.work, Path(run.state.get("output_dir") or run.dir.output)])
                cgroup.remove(run.cgroup)
                if run.uid_lock is not None:  # only now may the uid go to another job
                    os.close(run.uid_lock)
                    run.uid_lock = None
                if run.outcome is None:  # a cancel ends when the last process is gone
                    self._set_outcome(run, S.CANCELLED, self._cancel_reason(run),
                                      {"code": 1, "message": "CANCELLED: the job was cancelled by request"})
                run.state["gone"] = True
                run.dir.write_state(run.state)

    def _all_gone(self, run: Run) -> bool:
        wrappers_done = all(r.exit is not None or r.pid is None for r in run.replicas.values())
        if wrappers_done or run.killed:
            # Every replica's command has ended (or the grace is over): whatever the job left
            # behind (setsid, double fork, a cleared environment) dies with its namespace's
            # init, and anything in its cgroup (unsandboxed too).
            if run.holder is not None:
                sandbox.kill_holder(*run.holder)
            cgroup.kill_all(run.cgroup)
        if run.holder is not None or run.cgroup is not None:
            return wrappers_done and not (run.holder and sandbox.holder_alive(*run.holder)) and \
                not cgroup.members(run.cgroup)
        return wrappers_done and not any(
            processes.group_members(r.pid, self._marker(run, r)) for r in run.replicas.values() if r.pid is not None)

    def _refresh(self, run: Run) -> None:
        for rep in run.replicas.values():
            if not rep.started and rep.pid is not None:
                rep.started = run.dir.started_file(rep.task).exists()
            if rep.exit is not None or rep.pid is None:
                continue
            if rep.popen is not None:
                if rep.popen.poll() is None:
                    continue
            elif processes.is_alive(rep.pid, rep.created):
                continue
            info = run.dir.read_exit(rep.task)
            if info is None:  # the wrapper itself was killed: the command's status is unknown
                info = {"lost": True, "exit_code": None, "ended_at": _iso(_now()),
                        "wrapper_status": rep.popen.returncode if rep.popen else None}
            rep.exit = info
            rep.started = run.dir.started_file(rep.task).exists()

    def _decide(self, run: Run) -> None:
        if run.state.get("cancel_requested_at"):
            return  # _tick ends it as CANCELLED once every process is gone
        failed = [r for r in run.replicas.values() if r.failed]
        if failed:
            first = min(failed, key=lambda r: (r.exit.get("ended_at") or "~", r.pool, r.index))
            reason, error = self._failure(run, first)
            self._set_outcome(run, S.FAILED, reason, error, ended=_parse(first.exit.get("ended_at")))
            self._begin_stop(run)
            return
        # With parameter servers, workers serve too (ParameterServerStrategy: the chief
        # coordinates, workers and ps serve until torn down, as Vertex does when the chief ends).
        ps = [r for r in run.replicas.values() if r.tf_role == "ps"]
        servers = ("ps", "worker") if ps else ("ps",)
        trainers = [r for r in run.replicas.values() if r.tf_role not in servers]
        if all(r.exit is not None for r in trainers):
            reason = "every replica exited 0" if not ps else \
                "the chief and evaluator exited 0; the workers and parameter servers were stopped"
            if all(r.exited_unwatched for r in trainers):
                reason += " (while the service was not running)"
            self._set_outcome(run, S.SUCCEEDED, reason, None)
            self._begin_stop(run)
            return
        if run.timeout and (_now() - run.launched_at).total_seconds() > run.timeout:
            message = f"the job ran longer than its scheduling timeout of {run.timeout:g} s and was stopped"
            self._set_outcome(run, S.FAILED, message, {"code": 4, "message": message})
            self._begin_stop(run)
            return
        stalled = self._stalled(run)
        if stalled is not None:
            message = (f"replica {stalled.label} wrote no output and reported no progress for "
                       f"{run.stall_timeout:g} s (its stall_timeout_seconds); the job was stopped")
            self._set_outcome(run, S.FAILED, message, {"code": 4, "message": message, "replica": stalled.task})
            self._begin_stop(run)
            return
        if run.adopted and not run.claimed and self._polls - run.adopted_polls >= 3 and \
                time.monotonic() - run.adopted_mono > UNCLAIMED_SECONDS:
            log.warning("local run %s: no active job claims it; stopping its processes", run.ref)
            run.orphan = True
            self._set_outcome(run, S.FAILED, "no active job in the database claims this run", None)
            self._begin_stop(run)

    def _stalled(self, run: Run) -> ReplicaProc | None:
        """The first training replica (chief, worker) silent for longer than the stall
        timeout. Progress lines are output too, so output covers both. Parameter servers
        and the evaluator are silent by design while they wait, so they are not judged."""
        if not run.stall_timeout:
            return None
        now = time.time()
        for rep in run.replicas.values():
            if rep.exit is not None or rep.pid is None or rep.tf_role not in ("chief", "worker"):
                continue
            try:
                last = os.stat(run.dir.log(rep.task)).st_mtime
            except FileNotFoundError:
                last = 0.0
            if now - max(last, run.launched_at.timestamp()) > run.stall_timeout:
                return rep
        return None

    def _failure(self, run: Run, rep: ReplicaProc) -> tuple[str, dict]:
        when = " while the service was not running" if rep.exited_unwatched else ""
        tail = [line[:500] for line in logfiles.tail(run.dir.log(rep.task), LOG_TAIL_LINES)]
        if rep.exit.get("lost"):
            what = (f"replica {rep.label}, pid {rep.pid}, is gone without an exit status: "
                    f"it was killed (SIGKILL or the OOM killer){when}")
            code = None
        else:
            code = rep.exit.get("exit_code")
            sig = rep.exit.get("signal")
            what = f"replica {rep.label} exited with code {code}" + (f" (killed by {sig})" if sig else "") + when
        others = [r for r in run.replicas.values() if r is not rep and r.exit is None]
        reason = what + ("; the other replicas were stopped" if others else "")
        message = f"The replica {rep.task} " + (
            f"exited with a non-zero status of {code}." if code is not None else
            "disappeared without an exit status (killed).")
        if tail:
            message += " Last lines of its log:\n" + "\n".join(tail)
        return reason, {"code": code, "message": message, "replica": rep.task, "exit_code": code,
                        "signal": None if rep.exit.get("lost") else rep.exit.get("signal"),
                        "lost": bool(rep.exit.get("lost")), "log_tail": tail}

    def _cancel_reason(self, run: Run) -> str:
        how = (f"SIGTERM, then SIGKILL after the {self.grace:g} s grace period" if run.killed
               else "SIGTERM")
        return f"cancelled: every replica was stopped ({how})"

    def _set_outcome(self, run: Run, state: JobState, reason: str, error: dict | None,
                     ended: datetime | None = None) -> None:
        run.outcome = {"state": state.value, "reason": reason[:2000], "error": error,
                       "ended_at": _iso(ended or _now())}
        run.state["outcome"] = run.outcome
        run.dir.write_state(run.state)  # before anyone hears of it: a restart says the same
        log.info("job %s: %s: %s", run.job_id, state.value, reason)

    def _request_cancel(self, run: Run) -> None:
        run.state["cancel_requested_at"] = _iso(_now())
        run.dir.write_state(run.state)
        self._begin_stop(run)

    def _begin_stop(self, run: Run) -> None:
        if run.stop_deadline is None:
            run.stop_deadline = time.monotonic() + self.grace
        self._signal(run, signal.SIGTERM)

    def _marker(self, run: Run, rep: ReplicaProc) -> str:
        return processes.marker_value(run.job_id, rep.task)

    def _signal(self, run: Run, sig: signal.Signals) -> None:
        for rep in run.replicas.values():
            if rep.pid is None:
                continue
            if rep.exit is None:
                # Our wrapper is alive, so the group number is still ours.
                processes.signal_group(rep.pid, sig)
            elif run.holder is None:
                # The leader is gone; signal only what still carries our marker.
                processes.signal_pids(processes.group_members(rep.pid, self._marker(run, rep)), sig)

    def _observe(self, run: Run, job: JobHandle) -> list[Observation]:
        self._read_progress(run)
        prog = run.progress if run.progress_dirty else None
        run.progress_dirty = False
        out = []
        all_started = all(r.started for r in run.replicas.values())
        if job.state in (S.QUEUED, S.PENDING) and all_started and \
                (run.outcome is None or run.outcome["state"] != S.CANCELLED.value):
            reason = f"all {len(run.replicas)} replicas running"
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
            out.append(Observation(job.id, state=S(o["state"]), reason=o["reason"], error=o["error"],
                                   backend_ref=run.ref, ended_at=_parse(o["ended_at"]), progress=prog))
            return out
        if job.state == S.CANCELLING and not run.state.get("cancel_requested_at"):
            self._request_cancel(run)  # the service stopped between recording the cancel and sending it
        if out or prog is not None or job.backend_ref != run.ref:
            if out:
                out[-1] = dataclasses.replace(out[-1], progress=prog)
            else:
                out.append(Observation(job.id, backend_ref=run.ref, progress=prog))
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
                for ts, _stream, message, end in logfiles._read_records(path, offset, logfiles.READ_CHUNK):
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

    # -- restart -------------------------------------------------------------------------

    def _adopt_all(self) -> None:
        for path in sorted(self.work_dir.iterdir()):
            try:
                job_id = uuid.UUID(path.name)
            except ValueError:
                continue
            rd = RunDir(path)
            state = rd.read_state()
            if state is None or state.get("gone") or job_id in self._runs:
                continue
            try:
                self._adopt(rd, state)
            except Exception:
                log.exception("local run %s: could not be followed again", path)

    def _load(self, job: JobHandle) -> Run | None:
        rd = self._run_dir(job)
        state = rd.read_state()
        return self._adopt(rd, state) if state is not None else None

    def _adopt(self, rd: RunDir, state: dict) -> Run:
        job_id = uuid.UUID(state["job_id"])
        run = Run(job_id, rd, state, {}, _parse(state["launched_at"]), state.get("timeout_seconds"),
                  stall_timeout=state.get("stall_timeout_seconds"), uid=state.get("uid"),
                  adopted=True, adopted_mono=time.monotonic(), adopted_polls=self._polls)
        for task, r in state["replicas"].items():
            run.replicas[task] = ReplicaProc(task, r["pool"], r["index"], r["tf_role"], pid=r["pid"],
                                             created=r["create_time"])
        run.outcome = state.get("outcome")
        run.gone = bool(state.get("gone"))
        self._runs[job_id] = run
        self._refresh(run)
        for rep in run.replicas.values():
            rep.exited_unwatched = rep.exit is not None
        if run.gone:
            return run
        if self.isolate and run.uid is not None and run.holder is None:
            run.uid_lock = self.uids.relock(run.uid)  # an unsandboxed run: the service holds its uid
        elif run.holder is not None and state["holder"].get("lock_fd") is not None:
            run.uid_lock = sandbox.lock_of_holder(*run.holder, state["holder"]["lock_fd"])
        if state.get("phase") == "launching" and run.outcome is None:
            # The service died while starting the replicas: some may run without a recorded pid.
            sandbox.kill_orphan_holders(rd.path)  # started, but the crash came before state.json said so
            for rep in run.replicas.values():
                if rep.pid is None:
                    processes.signal_pids(processes.find_marked(self._marker(run, rep)), signal.SIGKILL)
            reason = "the service stopped while starting this job's replicas; the ones started were stopped"
            self._set_outcome(run, S.FAILED, reason, {"code": None, "message": reason})
        if run.outcome is not None or state.get("cancel_requested_at"):
            self._begin_stop(run)  # finish what the previous service had begun
        alive = [r.task for r in run.replicas.values() if r.exit is None and r.pid is not None]
        log.info("local run %s: followed again after a restart (alive: %s)", rd.path, ", ".join(alive) or "none")
        return run

    # -- watcher ---------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            with self._lock:
                for job_id, run in list(self._runs.items()):
                    try:
                        self._tick(run)
                    except Exception:
                        log.exception("local run %s: watcher pass failed", run.ref)
                        continue
                    if run.gone and run.outcome is not None and (run.reported or run.orphan):
                        del self._runs[job_id]
