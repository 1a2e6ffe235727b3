"""Second in a job's life: starting it. Its run folder (rundir.py), uid and sandbox when
the service is root (sandbox.py, nsholder.py, cgroup.py), one wrapper per replica
(wrapper.py), and exactly the environment Vertex AI would give each replica.

The Launcher also answers what a launch *would* give (view(): the job page shows it
before the job runs) and checks, once at start-up, that replicas can run at all
(prepare()). It records the run (runs.py) and hands it over; following it is the
supervisor's part (supervisor.py)."""
from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Collection, MutableMapping
from contextlib import ExitStack
from pathlib import Path

from service.backends import owned_tree
from service.backends.local import cgroup, isolation, processes, sandbox
from service.backends.local import resources as local_resources
from service.backends.local.rundir import RunDir, replica_status
from service.backends.local.runs import Holder, ReplicaState, Run, RunState, _now, host_id, parse_ref
from service.backends.local.settings import LocalSettings
from service.core.errors import Problem
from service.jobspec import CompiledJob, Replica
from service.jobspec.spec import DEFAULT_TRAINER_COMMAND
from service.lifecycle.protocol import JobHandle, LaunchView
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.local")

# A replica's address before its job is launched: the port is picked from the free ones then.
UNASSIGNED_ADDRESS = "127.0.0.1:<port chosen at launch>"


def free_ports(n: int, avoid: Collection[int] = frozenset()) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1, none in `avoid` (ports given to
    runs whose TensorFlow servers may not have bound them yet)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(100 * n + 100):
            if len(socks) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] in avoid:
                s.close()
                continue
            socks.append(s)
        if len(socks) < n:
            raise OSError(f"could not find {n} free ports on 127.0.0.1")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def timeout_seconds(compiled: CompiledJob) -> float | None:
    raw = ((compiled.custom_job_dict.get("jobSpec") or {}).get("scheduling") or {}).get("timeout")
    try:
        return float(raw.rstrip("s")) if raw else None
    except ValueError:
        return None


class Launcher:
    def __init__(self, settings: LocalSettings):
        self.settings = settings
        self.work_dir = settings.work_dir
        self.python = settings.python or sys.executable
        self.isolate = settings.isolate_replicas and isolation.isolating()
        self.sandboxed = self.isolate and settings.sandbox == "namespaces"
        self.uids = sandbox.UidPool(settings.replica_uid_base, settings.replica_uid_count)

    # -- before any job: can replicas run here at all? -------------------------------------

    def prepare(self) -> None:
        """Every process (it stores jobs and shows launch views): the interpreter, the run
        folder, and the sandbox when replicas are isolated; a clear error naming the setting."""
        python = shutil.which(self.python) if os.sep not in self.python else self.python
        if not python or not os.access(python, os.X_OK):
            raise ValueError(f"TRAINJOBS_LOCAL_PYTHON={self.python!r} is not an executable Python")
        self.python = python
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # Replicas may pass through (to their own folder) but not list other jobs.
        os.chmod(self.work_dir, 0o711)
        for root in self._shared_root():
            owned_tree.prepare_shared_root(root)
        if self.isolate:
            folders = [("TRAINJOBS_LOCAL_WORK_DIR", self.work_dir),
                       *(("TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR", root) for root in self._shared_root())]
            for variable, folder in folders:
                blocked = isolation.unreachable_ancestor(folder)
                if blocked is not None:
                    raise ValueError(
                        f"local replicas run as unprivileged uids and cannot reach {variable}={folder}: "
                        f"{blocked} is not searchable by others. Use a folder others may pass through "
                        f"(chmod o+x {blocked}, or set {variable}), or turn isolation off with "
                        "TRAINJOBS_LOCAL_ISOLATE_REPLICAS=false (replicas then run as root)")
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
        """What replicas run from, bound read-only into the sandbox's otherwise empty root (beside
        /usr, /lib...: nsholder.py): the interpreter's environment (a venv), the Python it points
        to, and the project's code (the trainer, and what the wrapper loads)."""
        python = Path(self.python)
        return sorted({python.parent.parent, Path(os.path.realpath(python)).parent.parent,
                       Path(__file__).resolve().parents[3]})

    def _holder_plan(self, rd: RunDir, output: Path, uid: int | None, cg: Path | None) -> sandbox.HolderPlan:
        """The job's view of the host: its own run folder (and a retry's first output) and the
        operator's shared folders writable; the rest of the run folders covered."""
        shared = [p.resolve() for p in self.settings.sandbox_shared_dirs if p.is_dir()]
        writable = [rd.path] + ([] if output.is_relative_to(rd.path) else [output]) + shared
        return sandbox.HolderPlan(writable=writable, visible=self._sandbox_readable(),
                                  hidden=[self.work_dir.resolve(), *self._shared_root()], uid=uid, run=rd.path,
                                  idle_seconds=self.settings.sandbox_idle_seconds, cgroup=cg, give_back=shared)

    def _shared_root(self) -> list[Path]:
        """The shared output folder, covered like the run folders: a job sees its own folder there alone."""
        return [self.settings.shared_output_dir] if self.settings.shared_output_dir is not None else []

    # -- what a job would get ------------------------------------------------------------------

    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        problems = []
        if any(r.tf_role is None for r in compiled.replicas):
            problems.append(Problem(
                "reduction_server", "Reduction Server pools cannot run on the local backend "
                "(Google's reducer image needs Vertex AI and GPU workers using NCCL)",
                'remove it for this job with "overrides": {"reduction_server": null}, '
                'or launch with "backend": "vertex"'))
        max_replicas = self.settings.max_replicas_per_job
        if len(compiled.replicas) > max_replicas:
            problems.append(Problem(
                "workers.replica_count", f"{len(compiled.replicas)} replicas; the local backend runs "
                f"at most {max_replicas} processes per job",
                "use fewer workers, or raise TRAINJOBS_LOCAL_MAX_REPLICAS_PER_JOB"))
        return problems

    def output_dir(self, rd: RunDir, compiled: CompiledJob, job_id: uuid.UUID) -> Path:
        """The run's own output folder; for a retry attempt, its first attempt's, so the
        trainer finds the checkpoints there and resumes (Vertex: the same base output directory).
        With a shared output folder (TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR), the job's folder there,
        named by its first attempt: an attempt on another backend that shares it goes on from it."""
        shared = self.settings.shared_output_dir
        if shared is not None:
            return owned_tree.shared_job_folder(shared, compiled.output_of or job_id)
        return RunDir.of(self.work_dir, uuid.UUID(compiled.output_of)).output if compiled.output_of else rd.output

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

    def view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
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
        # Read raw, not through RunState: a view must never fail on a half-written record.
        replicas = (state or {}).get("replicas") or {}
        output_dir: str | None
        if all(r.task_name in replicas for r in compiled.replicas) and state is not None:
            addresses = {r.task_name: replicas[r.task_name]["address"] for r in compiled.replicas}
            output_dir = state.get("output_dir")
        else:
            addresses = {r.task_name: UNASSIGNED_ADDRESS for r in compiled.replicas}
            output_dir = str(self.output_dir(rd, compiled, job_id))
        return LaunchView(compiled.custom_job_dict,
                          {r.task_name: self.env_of(job_id, compiled, r, addresses, output_dir, rd)
                           for r in compiled.replicas},
                          local_resources.view(compiled, str(output_dir)),
                          {r.task_name: replica_status(rd, r.task_name, state) for r in compiled.replicas} if state else {},
                          tensorboard_dir=f"{str(output_dir).rstrip('/')}/logs/",
                          host_output_dir=f"{str(output_dir).rstrip('/')}/")

    # -- launching -------------------------------------------------------------------------------

    def _addresses(self, compiled: CompiledJob, runs: MutableMapping[uuid.UUID, Run]) -> dict[str, str]:
        if self.sandboxed:
            # The job's own network namespace: its loopback is its alone, every port is free.
            return {r.task_name: f"127.0.0.1:{sandbox.FIRST_PORT + i}" for i, r in enumerate(compiled.replicas)}
        in_use = {int(r.address.rsplit(":", 1)[1]) for run in runs.values() if not run.gone
                  for r in run.state.replicas.values()}
        ports = free_ports(len(compiled.replicas), in_use)
        return {r.task_name: f"127.0.0.1:{p}" for r, p in zip(compiled.replicas, ports, strict=False)}

    def launch(self, job: JobHandle, runs: MutableMapping[uuid.UUID, Run]) -> Run:
        """Start `job`'s replicas and enter its Run in `runs` (the supervisor's table, which
        also tells the ports other runs were given). A replica that could not be started
        leaves the run with a FAILED outcome: the caller stops the others.

        Until the run is entered, every step that fails undoes what the steps before it made,
        in reverse order, through one ExitStack (the wrappers and the sandbox's init killed,
        the state file removed, the cgroup removed, the uid's lock let go): nothing of the job ran, and the next pass
        launches it afresh."""
        compiled = job.compiled
        rd = RunDir.of(self.work_dir, job.id)
        with ExitStack() as undo:
            uid, lock = self.uids.acquire() if self.isolate else (None, None)
            if lock is not None:
                undo.callback(os.close, lock)
            output, addresses, cg = self._prepare(job, rd, uid, runs, undo)
            run = self._record(job, rd, uid, lock, output, addresses, cg)
            undo.callback(rd.state_file.unlink, missing_ok=True)
            # The init inherits the uid's lock and holds it as long as anything of the job lives.
            holder = sandbox.begin_holder(self._holder_plan(rd, output, uid, cg), lock) if self.sandboxed else None
            if holder is not None:
                undo.callback(_kill, {"init": holder})   # it holds the uid's lock too
            wrappers, failed = self._spawn(compiled, rd, uid, cg)
            undo.callback(_kill, wrappers)
            if holder is not None:
                pid, created = sandbox.holder_ready(holder)
                run.state.holder = Holder(pid, created, lock)  # the same fd number there
            undo.pop_all()   # launched: from here the run is followed, and stopped like any other
        runs[job.id] = run
        self._start(job.id, compiled, run, wrappers, addresses, rd)
        if failed is not None:
            task, error = failed
            log.error("job %s: cannot start replica %s: %s", job.id, task, error)
            run.record_outcome(JobState.FAILED, f"could not start replica {task}: {error}",
                               {"code": None, "message": f"could not start replica {task}: {error}", "replica": task})
        return run

    def _prepare(self, job: JobHandle, rd: RunDir, uid: int | None, runs: MutableMapping[uuid.UUID, Run],
                 undo: ExitStack) -> tuple[Path, dict[str, str], Path | None]:
        """The run folder, the output folder, the replicas' addresses and the job's cgroup."""
        compiled = job.compiled
        rd.create(uid)
        output = self.output_dir(rd, compiled, job.id)
        if self.settings.shared_output_dir is not None:
            owned_tree.hand_over(output, (uid, uid) if uid is not None else None)   # this attempt's uid alone
        elif output != rd.output:
            # The first attempt's files were given back to the service when it ended: this
            # attempt's uid (another one, maybe) must read its checkpoints and write new ones.
            isolation.own_tree(output, uid)
        addresses = self._addresses(compiled, runs)
        # Every process of the job, sandboxed or not, however it detaches: listed, limited, killed.
        cg = cgroup.create(job.id, self.settings.max_processes_per_job) if self.isolate else None
        undo.callback(cgroup.remove, cg)
        return output, addresses, cg

    def _record(self, job: JobHandle, rd: RunDir, uid: int | None, lock: int | None, output: Path,
                addresses: dict[str, str], cg: Path | None) -> Run:
        """The run's state.json, saved before any process starts: a restart finds the launch."""
        compiled = job.compiled
        # The job's base output directory, whether the template names one (a gs:// prefix
        # means nothing here) or not: the run's own folder, as Vertex gives every job
        # <TRAINJOBS_VERTEX_BASE_OUTPUT_DIRECTORY>/<job id> when its template sets none.
        state = RunState(
            job_id=job.id, phase="launching", launched_at=_now(), output_dir=str(output),
            base_output_directory=compiled.base_output_directory, timeout_seconds=timeout_seconds(compiled),
            host=host_id(), uid=uid, stall_timeout_seconds=compiled.stall_timeout_seconds, holder=None,
            cgroup=str(cg) if cg is not None else None,
            replicas={r.task_name: ReplicaState(pool=r.pool, index=r.index, tf_role=r.tf_role,
                                                address=addresses[r.task_name], argv=self.command_of(r))
                      for r in compiled.replicas})
        run = Run.of_state(rd, state)
        run.uid_lock = lock
        run.save()
        return run

    @staticmethod
    def _spawn(compiled: CompiledJob, rd: RunDir, uid: int | None,
               cg: Path | None) -> tuple[dict[str, subprocess.Popen], tuple[str, OSError] | None]:
        """The replicas' wrappers (an interpreter each), started while the sandbox is being set
        up; they wait for their spec. A wrapper that cannot start stops the spawning: (the
        wrappers started, the replica that failed and why)."""
        wrappers: dict[str, subprocess.Popen] = {}
        for r in compiled.replicas:
            task = r.task_name
            try:
                wrappers[task] = sandbox.spawn_wrapper(log=rd.log(task), started=rd.started_file(task),
                                                       exit=rd.exit_file(task), wrapper_log=rd.wrapper_log(task),
                                                       uid=uid, cgroup=cg)
            except OSError as e:
                return wrappers, (task, e)
        return wrappers, None

    def _start(self, job_id: uuid.UUID, compiled: CompiledJob, run: Run, wrappers: dict[str, subprocess.Popen],
               addresses: dict[str, str], rd: RunDir) -> None:
        """Every pid recorded (a crash loses none), then each wrapper sent its command."""
        state = run.state
        for task, popen in wrappers.items():
            rep = run.replicas[task]
            rep.popen, rep.pid = popen, popen.pid
            rep.created = processes.start_time(popen.pid)
            state.replicas[task].pid, state.replicas[task].create_time = rep.pid, rep.created
        run.save()  # every pid recorded before any command runs: a crash loses none
        join = state.holder.pid if state.holder else None
        by_task = {r.task_name: r for r in compiled.replicas}
        for task, popen in wrappers.items():
            sandbox.send_spec(popen, argv=state.replicas[task].argv, cwd=rd.work, join=join,
                              env=self.env_of(job_id, compiled, by_task[task], addresses, state.output_dir, rd))

    def launched(self, run: Run) -> None:
        """The launch is over (the caller has stopped what must stop): a restart now follows
        the run rather than finishing its launch."""
        run.state.phase = "running"
        run.save()
        log.info("job %s: started %d replicas in %s%s", run.job_id, len(run.replicas), run.ref,
                 " (sandboxed)" if run.holder else "")


def _kill(processes_: dict[str, subprocess.Popen]) -> None:
    """A launch undone: its wrappers (waiting for a spec that never comes) and its sandbox's
    init go."""
    for popen in processes_.values():
        popen.kill()
        popen.wait()
