"""Starting a local job: its run folder, uid, sandbox (when the service is root) and
one wrapper per replica. Moved out of backend.py, which follows what this starts."""
from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from service.backends.local import cgroup, isolation, processes, sandbox
from service.backends.local.rundir import RunDir
from service.backends.local.runs import ReplicaProc, Run, _iso, _now, host_id
from service.jobspec import CompiledJob
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.local")


def free_ports(n: int, avoid: set[int] = frozenset()) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1, none in `avoid` (ports given to
    runs whose TensorFlow servers may not have bound them yet)."""
    socks = []
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


def _addresses(backend: Any, compiled: CompiledJob) -> dict[str, str]:
    if backend.sandboxed:
        # The job's own network namespace: its loopback is its alone, every port is free.
        return {r.task_name: f"127.0.0.1:{sandbox.FIRST_PORT + i}" for i, r in enumerate(compiled.replicas)}
    in_use = {int(r["address"].rsplit(":", 1)[1]) for run in backend._runs.values() if not run.gone
              for r in run.state["replicas"].values()}
    ports = free_ports(len(compiled.replicas), in_use)
    return {r.task_name: f"127.0.0.1:{p}" for r, p in zip(compiled.replicas, ports, strict=False)}


def launch(backend: Any, job: JobHandle) -> Run:
    """`backend`: the LocalBackend (not imported: it imports this module)."""
    compiled = job.compiled
    rd = RunDir.of(backend.work_dir, job.id)
    existing = rd.read_state()
    if existing is not None:  # launched before a crash that the database never heard of
        return backend._adopt(rd, existing)
    uid = lock = None
    if backend.isolate:
        uid, lock = backend.uids.acquire()
    try:
        rd.create(uid)
        output = backend._output_dir(rd, compiled)
        if output != rd.output:
            # The first attempt's files were given back to the service when it ended: this
            # attempt's uid (another one, maybe) must read its checkpoints and write new ones.
            isolation.own_tree(output, uid)
        addresses = _addresses(backend, compiled)
        # Every process of the job, sandboxed or not, however it detaches: listed, limited, killed.
        cg = cgroup.create(job.id, backend.settings.local_max_processes_per_job) if backend.isolate else None
    except BaseException:
        if lock is not None:
            os.close(lock)
        raise
    # The job's base output directory, whether the template names one (a gs:// prefix
    # means nothing here) or not: the run's own folder, as Vertex gives every job
    # <TRAINJOBS_VERTEX_BASE_OUTPUT_DIRECTORY>/<job id> when its template sets none.
    output_dir = str(output)
    launched = _now()
    state = {
        "job_id": str(job.id), "phase": "launching", "launched_at": _iso(launched),
        "output_dir": output_dir, "base_output_directory": compiled.base_output_directory,
        "timeout_seconds": timeout_seconds(compiled), "host": host_id(), "uid": uid,
        "stall_timeout_seconds": compiled.stall_timeout_seconds, "holder": None,
        "cgroup": str(cg) if cg is not None else None,
        "replicas": {r.task_name: {"pool": r.pool, "index": r.index, "tf_role": r.tf_role,
                                   "address": addresses[r.task_name], "pid": None, "create_time": None,
                                   "argv": backend.command_of(r)}
                     for r in compiled.replicas},
        "cancel_requested_at": None, "outcome": None, "gone": False,
    }
    rd.write_state(state)

    def undo() -> None:  # nothing of the job ran: the next pass launches it afresh
        rd.state_file.unlink()
        cgroup.remove(cg)
        if lock is not None:
            os.close(lock)

    holder = None
    if backend.sandboxed:
        writable = [rd.path] + ([] if output.is_relative_to(rd.path) else [output]) + \
            [Path(p).resolve() for p in backend.settings.local_sandbox_shared_dirs if Path(p).is_dir()]
        try:
            # The init inherits the uid's lock and holds it as long as anything of the job lives.
            holder = sandbox.begin_holder(writable, backend._sandbox_readable(), lock, cg)
        except OSError:
            undo()
            raise
    # The wrappers start (an interpreter each) while the sandbox is being set up; they wait
    # for their spec, sent once the sandbox is ready and their pids are recorded.
    wrappers, failed = {}, None
    for r in compiled.replicas:
        task = r.task_name
        try:
            wrappers[task] = sandbox.spawn_wrapper(log=rd.log(task), started=rd.started_file(task),
                                                   exit=rd.exit_file(task), wrapper_log=rd.wrapper_log(task),
                                                   uid=uid, cgroup=cg)
        except OSError as e:
            failed = (task, e)
            break
    if holder is not None:
        try:
            pid, created = sandbox.holder_ready(holder)
        except OSError:
            for popen in wrappers.values():
                popen.kill()
                popen.wait()
            undo()
            raise
        state["holder"] = {"pid": pid, "create_time": created, "lock_fd": lock}  # same fd number there
    run = Run(job.id, rd, state, {}, launched, state["timeout_seconds"],
              stall_timeout=compiled.stall_timeout_seconds, uid=uid, uid_lock=lock)
    for r in compiled.replicas:
        run.replicas[r.task_name] = ReplicaProc(r.task_name, r.pool, r.index, r.tf_role)
    backend._runs[job.id] = run
    for task, popen in wrappers.items():
        rep = run.replicas[task]
        rep.popen, rep.pid = popen, popen.pid
        rep.created = processes.start_time(popen.pid)
        state["replicas"][task].update(pid=rep.pid, create_time=rep.created)
    rd.write_state(state)  # every pid recorded before any command runs: a crash loses none
    join = state["holder"]["pid"] if state["holder"] else None
    by_task = {r.task_name: r for r in compiled.replicas}
    for task, popen in wrappers.items():
        sandbox.send_spec(popen, argv=state["replicas"][task]["argv"], cwd=rd.work, join=join,
                          env=backend.env_of(job.id, compiled, by_task[task], addresses, output_dir, rd))
    if failed is not None:
        task, e = failed
        log.error("job %s: cannot start replica %s: %s", job.id, task, e)
        backend._set_outcome(run, JobState.FAILED, f"could not start replica {task}: {e}",
                             {"code": None, "message": f"could not start replica {task}: {e}", "replica": task})
    if run.outcome is not None:
        # Replicas started before the failure would wait forever for the missing one
        # and hold a slot of the queue: stop them like any failed cluster.
        backend._begin_stop(run)
    state["phase"] = "running"
    rd.write_state(state)
    log.info("job %s: started %d replicas in %s%s", job.id, len(run.replicas), run.ref,
             " (sandboxed)" if join else "")
    return run
