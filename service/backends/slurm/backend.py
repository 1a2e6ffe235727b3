"""The slurm backend: each job is one heterogeneous Slurm job on a team's own cluster,
driven through the Slurm clients (sbatch, squeue, scancel) from the controller's host.

Truth lives in Slurm and in the job's run folder on shared storage (runs.py), never in
this process: a restarted controller follows every job again with nothing to adopt
but the Slurm job carrying the trainjobs job id in its name. Before any sbatch, that
name is looked up, so one attempt never becomes two Slurm jobs; after an attempt whose
outcome is unknown (a timeout, a crash), no new sbatch is made until an earlier one
can no longer land (Capabilities.resubmit_after_seconds), only lookups.

Following costs one `squeue --json` per pass for every job (poller.py), at most every
`slurm_poll_interval_seconds`; logs and progress are read from the run folders."""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from service.backends.owned_tree import hand_over, shared_job_folder
from service.backends.slurm import endings, log_reader, placement, poller, preflight, replicas, running, script
from service.backends.slurm.cli import SlurmCli
from service.backends.slurm.config import SlurmConfig, SlurmConfigError
from service.backends.slurm.config import check as check_config
from service.backends.slurm.runs import SlurmRun, own_tree
from service.core.errors import Problem
from service.core.text import plural
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
    TransientBackendError,
)
from service.lifecycle.states import TERMINAL, JobState

log = logging.getLogger("trainjobs.backends.slurm")
S = JobState
LAUNCHER = Path(__file__).with_name("launcher.py")
UNKNOWN_ADDRESS = "<node>:<port chosen at run time>"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SlurmBackend(Backend):
    name = "slurm"

    def __init__(self, cfg: SlurmConfig):
        self.cfg = cfg
        self.cli = SlurmCli(cfg)
        # An sbatch the client gave up on lands at once or never; twice its timeout covers a
        # deposed controller's call still in flight.
        self.capabilities = Capabilities(bulk_poll=True, max_running=cfg.max_running,
                                         resubmit_after_seconds=2 * cfg.command_timeout, log_poll_seconds=0.2,
                                         runs_on="the team's own Slurm cluster", preempts=True,
                                         output_root=str(cfg.shared_output_dir or cfg.work_dir),
                                         shared_output=str(cfg.shared_output_dir) if cfg.shared_output_dir else None)
        self.identity: tuple[int, int] | None = None
        self.job_uids: frozenset[int] | None = None
        self.progress = log_reader.ProgressFollower()
        self._lock = threading.Lock()
        self._listing: dict[str, poller.SlurmJob] | None = None   # this pass's squeue
        self._listed_at: float | None = None
        self._in_pass = False
        self._uids: dict[uuid.UUID, int] = {}   # job -> the uid it was submitted as (state.json), once read
        # job -> (Slurm job id, monotonic deadline): preempted jobs whose tasks had SIGTERM and are
        # killed once the grace runs out, by the first poll after it (the loop never waits).
        self._kill_at: dict[uuid.UUID, tuple[str, float]] = {}
        self._now = _utcnow

    # -- lifecycle ------------------------------------------------------------------------------
    def start_client(self) -> None:
        check_config(self.cfg)
        problems = preflight.cluster_problems(self.cli)
        if problems:
            raise SlurmConfigError(problems)
        self.identity = self.cfg.job_identity()
        # Whose jobs are ours: the job users' (a root service: each team's, the shared one), else the service's own.
        self.job_uids = self.cfg.job_uids()
        work_dir = self.cfg.work_dir
        assert work_dir is not None, "check_config refuses a missing TRAINJOBS_SLURM_WORK_DIR"
        problems = preflight.folder_problems(self.cfg, work_dir, self.identity is not None)
        if problems:
            raise SlurmConfigError(problems)

    def stop_controller(self) -> None:
        self.progress.clear()
        self._uids.clear()
        self._kill_at.clear()

    # -- what the service asks --------------------------------------------------------------------
    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        return script.check(compiled, self.cfg)

    def check_for_team(self, compiled: CompiledJob, team: str) -> list[Problem]:
        """A `slurm-account` label against the account TRAINJOBS_SLURM_TEAM_ACCOUNTS gives the team."""
        problem = placement.conflict(compiled, self.cfg, "account", team)
        return [problem] if problem is not None else []

    def run_of(self, job_id: uuid.UUID | str) -> SlurmRun:
        if self.cfg.work_dir is None:
            raise RuntimeError("TRAINJOBS_SLURM_WORK_DIR is not set")
        return SlurmRun.of(self.cfg.work_dir, job_id)

    def output_dir(self, job_id: uuid.UUID | str, compiled: CompiledJob) -> Path:
        """A retry attempt writes where its first attempt did (its checkpoints), as on Vertex: in its
        run folder, or in the operator's shared output folder (another backend's attempt may have)."""
        if self.cfg.shared_output_dir is not None:
            return shared_job_folder(self.cfg.shared_output_dir, compiled.output_of or job_id)
        return self.run_of(compiled.output_of or job_id).output

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        """Each task's env as the launcher gives it: the node and port each task published
        once it started (before that, a placeholder), the run folder's AIP_* directories,
        and the Slurm job id and node."""
        run = self.run_of(job_id)
        addr = {r.task_name: run.task_record(r.task_name, "addr") for r in compiled.replicas} if backend_ref else {}
        addresses = {r.task_name: (addr.get(r.task_name) or {}).get("address") or UNKNOWN_ADDRESS
                     for r in compiled.replicas}
        output = str(self.output_dir(job_id, compiled))
        env = {}
        for r in compiled.replicas:
            e = compiled.env(r, addresses, output)
            if backend_ref:
                e["TRAINJOBS_SLURM_JOB_ID"] = backend_ref
                node = (addr.get(r.task_name) or {}).get("node")
                if node:
                    e["TRAINJOBS_SLURM_NODE"] = node
            env[r.task_name] = e
        return LaunchView(compiled.custom_job_dict, env, replicas=self._replica_statuses(job_id, compiled, backend_ref),
                          tensorboard_dir=f"{output.rstrip('/')}/logs/")

    def _replica_statuses(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> dict:
        """Each task's state, exit code and times from its launcher's records (the job view's
        cluster[].status, as local jobs have it); none before the job reached Slurm."""
        if not backend_ref:
            return {}
        run = self.run_of(job_id)
        return {r.task_name: replicas.status(run, r.task_name) for r in compiled.replicas if r.tf_role is not None}

    # -- submit ---------------------------------------------------------------------------------
    def submit(self, job: JobHandle) -> SubmitResult:
        found = self._lookup(job)
        if found is not None:
            log.warning("job %s: Slurm job %s already carries its name; adopting it", job.id, found)
            return SubmitResult(backend_ref=found, state=S.PENDING,
                                reason=f"adopted Slurm job {found}, found by its name {script.job_name(job.id)}")
        if self._attempt_may_land(job):
            return SubmitResult(reason=f"an earlier sbatch of this job may still land; looking it up by its name "
                                       f"before submitting again (for {self.capabilities.resubmit_after_seconds:g} s)")
        try:   # the team's account and the class's QoS, before anything is written
            placement.arbitrated(job.compiled, self.cfg, job.team, job.priority_class)
        except placement.PlacementConflict as e:
            raise PermanentBackendError(str(e), details={"slurm_state": None, "slurm_reason": None,
                                                          "slurm_job_id": None}) from e
        run = self.run_of(job.id)
        try:
            self._prepare(job, run)
        except OSError as e:
            raise TransientBackendError(f"could not prepare the run folder {run.path}: {e}",
                                        nothing_launched=True) from e
        identity = self._identity(job)
        argv = script.sbatch_argv(job.id, job.compiled, self.cfg, str(run.path), identity, team=job.team,
                                   priority_class=job.priority_class)
        slurm_id = self.cli.sbatch(argv)
        uid = identity[0] if identity is not None else os.geteuid()
        run.write_state({"job_id": str(job.id), "slurm_job_id": slurm_id, "submitted_at": self._now().isoformat(),
                         "uid": uid})
        self._uids[job.id] = uid
        log.info("job %s: submitted as Slurm job %s", job.id, slurm_id)
        return SubmitResult(backend_ref=slurm_id, state=S.PENDING,
                            reason=f"submitted as Slurm job {slurm_id} "
                                   f"({plural(len(script.groups_of(job.compiled)), 'component')}, "
                                   f"{plural(len(job.compiled.replicas), 'task')})")

    def _lookup(self, job: JobHandle) -> str | None:
        """The Slurm job an earlier attempt made: this pass's listing, else a lookup by name
        (a submit outside a pass, or a job younger than the listing), else the run folder's
        record (slurmctld forgets ended jobs after MinJobAge)."""
        listing = self._listing if self._in_pass else None
        if listing is not None and poller.key(job.id, self._uid(job)) in listing:
            return listing[poller.key(job.id, self._uid(job))].slurm_id
        ids = self.cli.find_by_name(script.job_name(job.id), self._uid(job))
        if ids:
            return ids[0]
        state = self.run_of(job.id).read_state()
        if state and str(state.get("slurm_job_id", "")).isdigit() and state.get("job_id") == str(job.id):
            return str(state["slurm_job_id"])
        return None

    def _uid(self, job: JobHandle) -> int:
        """The user `job` runs as: the one it was submitted as (its state.json: a mapping changed
        since must not lose a running job), else its team's (TRAINJOBS_SLURM_TEAM_USERS), else
        the shared one."""
        if self.job_uids is None:
            raise RuntimeError("slurm backend not started")
        uid = self._uids.get(job.id)
        if uid is None and (job.backend_ref or job.launch_attempted_at):
            uid = self._recorded_uid(job)
            if uid is not None:
                self._uids[job.id] = uid
        if uid is not None:
            return uid
        identity = self._identity(job)
        return identity[0] if identity is not None else os.geteuid()

    def _recorded_uid(self, job: JobHandle) -> int | None:
        state = self.run_of(job.id).read_state()
        if not state or state.get("job_id") != str(job.id):
            return None
        if isinstance(state.get("uid"), int):
            return state["uid"]
        if state.get("slurm_job_id"):   # submitted before team users existed: as the shared user
            return self.identity[0] if self.identity is not None else os.geteuid()
        return None

    def _identity(self, job: JobHandle) -> tuple[int, int] | None:
        return self.cfg.job_identity(job.team) if job.team in self.cfg.team_users else self.identity

    def _attempt_may_land(self, job: JobHandle) -> bool:
        prev = job.launch_attempted_at
        return prev is not None and (self._now() - prev).total_seconds() < self.capabilities.resubmit_after_seconds

    def _prepare(self, job: JobHandle, run: SlurmRun) -> None:
        compiled = job.compiled
        tasks = log_reader.tasks_of(compiled)
        identity = self._identity(job)
        run.create(tasks, identity)
        output = self.output_dir(job.id, compiled)
        if self.cfg.shared_output_dir is not None:
            hand_over(output, identity)   # this attempt's user alone, whichever backend wrote it before
        elif output != run.output:
            own_tree(output, identity)   # a retry reads its first attempt's checkpoints
        content = script.job_file(job.id, compiled, self.cfg, str(run.path), str(output))
        run.write_private(run.job_file, script.dumps(content), 0o640)
        run.write_private(run.batch_script, script.batch_script(compiled, self.cfg, str(run.path)), 0o750)
        run.write_private(run.launcher, LAUNCHER.read_text(), 0o640)

    # -- poll -------------------------------------------------------------------------------------
    def begin_pass(self) -> None:
        with self._lock:
            self._in_pass = True
            self._listing = None

    def end_pass(self) -> None:
        with self._lock:
            self._in_pass = False
            self._listing = None

    def _list(self) -> dict[str, poller.SlurmJob] | None:
        """This pass's listing: one squeue for every job, at most every poll interval."""
        if self._in_pass and self._listing is not None:
            return self._listing
        now = time.monotonic()
        if self._listed_at is not None and now - self._listed_at < self.cfg.poll_interval:
            return None
        self._listed_at = now
        if self.job_uids is None:
            raise RuntimeError("slurm backend not started")
        listing = poller.parse(self.cli.squeue_all(), self.job_uids)
        if self._in_pass:
            self._listing = listing
        return listing

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        if not jobs:
            return []
        try:
            listing = self._list()
        except TransientBackendError as e:
            log.warning("slurm: not following jobs this pass: %s", e)
            listing = None
        self._kill_overdue(jobs)
        out: list[Observation] = []
        if listing is None:
            return []   # not due: logs and progress wait for the next listing too (shared storage is slow)
        for job in jobs:
            try:
                obs = self._observe(job, listing)
                out += self._with_progress(job, obs)
            except Exception:  # one job's trouble never stops the others'
                log.exception("job %s: could not follow its Slurm job", job.id)
        return out

    def _with_progress(self, job: JobHandle, obs: Observation | None) -> list[Observation]:
        ended = obs is not None and obs.state in TERMINAL
        prog = None
        if job.backend_ref and (job.state in (S.RUNNING, S.CANCELLING) or ended):
            prog = self.progress.read(str(job.id), self.run_of(job.id), job.compiled, to_end=ended)
        if ended:
            self.progress.forget(str(job.id))
            self._uids.pop(job.id, None)
            self._kill_at.pop(job.id, None)
        if prog is None:
            return [obs] if obs is not None else []
        return [dataclasses.replace(obs, progress=prog) if obs is not None else
                Observation(job.id, backend_ref=job.backend_ref, progress=prog)]

    def _observe(self, job: JobHandle, listing: dict[str, poller.SlurmJob]) -> Observation | None:
        sj = listing.get(poller.key(job.id, self._uid(job)))
        run = self.run_of(job.id)
        if sj is None:
            return self._missing(job, run)
        ref = sj.slurm_id
        if sj.ended:
            return endings.ended(job, sj, run)
        requeued = running.requeued(job, run, sj)
        if requeued is not None:
            return requeued
        if sj.waiting or sj.state == "SUSPENDED":
            if job.state == S.QUEUED or job.backend_ref != ref:
                return Observation(job.id, state=S.PENDING, backend_ref=ref,
                                   reason=f"Slurm job {ref} is {sj.state.lower()} ({sj.reason})")
            return None
        if sj.state in ("RUNNING", "COMPLETING"):
            silent = running.silence(job, run, sj)
            if silent is not None:
                return silent
            if job.state not in (S.QUEUED, S.PENDING):
                return None
            tasks = log_reader.tasks_of(job.compiled)
            started = [t for t in tasks if run.task_record(t, "started") is not None]
            if len(started) == len(tasks):
                return Observation(job.id, state=S.RUNNING, backend_ref=ref, started_at=sj.start,
                                   reason=f"{'the task' if len(tasks) == 1 else f'all {len(tasks)} tasks'} running on "
                                          f"{', '.join(sj.nodes)} "
                                          f"(Slurm job {ref})")
            if job.state == S.QUEUED:
                return Observation(job.id, state=S.PENDING, backend_ref=ref,
                                   reason=f"Slurm job {ref} allocated {', '.join(sj.nodes)}; starting "
                                          f"{len(tasks) - len(started)} of {plural(len(tasks), 'task')}")
        return None

    def _missing(self, job: JobHandle, run: SlurmRun) -> Observation | None:
        """A job squeue does not show: not submitted yet (an attempt settling), or ended
        longer ago than the cluster's MinJobAge while nobody followed it."""
        if not job.backend_ref:
            if job.state == S.CANCELLING and not self._attempt_may_land(job):
                return Observation(job.id, state=S.CANCELLED, reason="cancelled before it reached Slurm")
            return None
        ref = job.backend_ref
        decided = (run.read_state() or {}).get("outcome")
        if decided:
            return Observation(job.id, state=S(decided["state"]), reason=decided["reason"],
                               error=endings.with_slurm_fields(decided["error"], None, None, ref))
        return self._from_jobcomp(job, run, ref) or endings.from_exit_records(job, run, ref)

    def _from_jobcomp(self, job: JobHandle, run: SlurmRun, ref: str) -> Observation | None:
        """A job a trusted listing no longer shows, ended as the cluster's job-completion
        record says (`sacct -c`): a job that COMPLETED while nobody looked is SUCCEEDED.
        None without a record of an ended job: the run folder's exit records judge then."""
        record = self.cli.jobcomp(ref, script.job_name(job.id))
        if record is None or record["state"] not in poller.ENDED:
            return None
        sj = poller.SlurmJob(slurm_id=ref, name=script.job_name(job.id), state=record["state"], reason="",
                             exit_code=None, nodes=(), start=None, end=None, time_limit=None, worst=record["state"])
        obs = endings.ended(job, sj, run)
        return dataclasses.replace(obs, reason=f"{obs.reason} (Slurm no longer lists it; from the cluster's "
                                               "job-completion record)")

    # -- shared capacity (SharesCapacity) ----------------------------------------------------------
    def offered_capacity(self) -> dict[str, int]:
        return {}     # SharesCapacity: the cluster arbitrates itself (docs/slurm.md); nothing offered

    def demand(self, compiled: CompiledJob) -> dict[str, int]:
        """What its sbatch asks: CPUs (--cpus-per-task x tasks) and GPUs by type, over every pool."""
        out: dict[str, int] = {}
        for pool in (compiled.custom_job_dict.get("jobSpec") or {}).get("workerPoolSpecs") or []:
            if not pool:
                continue
            n = int(pool.get("replicaCount") or 0)
            out["vcpu"] = out.get("vcpu", 0) + script.cpus(pool, self.cfg) * n
            accelerator = (pool.get("machineSpec") or {}).get("acceleratorType")
            if accelerator and script.gpus(pool):
                out[f"gpu:{accelerator}"] = out.get(f"gpu:{accelerator}", 0) + script.gpus(pool) * n
        return out

    # -- cancel -----------------------------------------------------------------------------------
    def cancel(self, job: JobHandle) -> JobState | None:
        ref = job.backend_ref
        if not ref:
            ids = self.cli.find_by_name(script.job_name(job.id), self._uid(job))
            if not ids:
                # An sbatch still settling may land yet: poll ends it (CANCELLED once none can).
                return None if self._attempt_may_land(job) else S.CANCELLED
            ref = ids[0]
        self.cli.scancel(ref)
        self._cancel_sent(job, ref)
        return None

    def _cancel_sent(self, job: JobHandle, ref: str) -> None:
        run = self.run_of(job.id)
        state = run.read_state()
        if state is not None:
            state["cancel_sent"] = self._now().isoformat()
            run.write_state(state)

    # -- preempt (SharesCapacity) ------------------------------------------------------------------
    def preempt(self, job: JobHandle, grace_seconds: float) -> None:
        """SIGTERM to every task of the job's steps (`scancel --signal=TERM`: the steps only, not
        the batch script, which would end the job and with it the grace), so the trainer saves a
        checkpoint; whatever still runs `grace_seconds` later is killed (`scancel --signal=KILL
        --full`) by the first poll after the deadline. Returns at once. Its end is then reported as
        a preemption (error.cause "preemption", preempted_by "trainjobs")."""
        ref = job.backend_ref
        if not ref:
            ids = self.cli.find_by_name(script.job_name(job.id), self._uid(job))
            if not ids:
                return   # nothing launched to stop: the caller's requeue needs no signal
            ref = ids[0]
        self.cli.signal(ref, "TERM")
        self._kill_at[job.id] = (ref, time.monotonic() + max(0.0, grace_seconds))
        run = self.run_of(job.id)
        state = run.read_state()
        if state is not None:
            state["preempt_sent"] = self._now().isoformat()
            state["preempt_grace_seconds"] = grace_seconds
            run.write_state(state)
        log.info("job %s: preempting Slurm job %s (SIGTERM; killed after %g s)", job.id, ref, grace_seconds)

    def _kill_overdue(self, jobs: Sequence[JobHandle]) -> None:
        now = time.monotonic()
        for job in jobs:
            due = self._kill_at.get(job.id)
            if due is None or due[1] > now:
                continue
            try:
                self.cli.signal(due[0], "KILL", full=True)
            except TransientBackendError as e:
                log.warning("job %s: could not kill preempted Slurm job %s yet: %s", job.id, due[0], e)
                continue   # the next pass tries again
            self._kill_at.pop(job.id, None)

    # -- logs -------------------------------------------------------------------------------------
    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        return log_reader.read_page(self.run_of(job.id), job.compiled, replica, since, limit)
