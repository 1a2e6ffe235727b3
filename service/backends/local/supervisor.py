"""Third in a job's life: following its processes until nothing of it is left.

The Supervisor holds the runs this controller follows (the table the launcher enters
new runs in), and on every pass (`tick`, from the backend's poll and from a watcher
thread every WATCH_INTERVAL) it reaps the replicas, notices their exits, decides the
run's outcome (a failure, success, the scheduling timeout, an orphan run nobody
claims), stops what must stop (SIGTERM, SIGKILL after the grace period, the
namespace's init and the cgroup last) and gives the uid back. A restarted service
rebuilds each run from its state.json (`adopt`) and finishes what its predecessor
had begun. It decides a *run's* outcome only: the job's state is the lifecycle's,
told by the backend (backend.py). A stall is the lifecycle's to judge too: the
supervisor only measures its replicas' silence (`silence`)."""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from service.backends import replica_logs
from service.backends.local import cgroup, isolation, processes, sandbox
from service.backends.local.rundir import RunDir
from service.backends.local.runs import ReplicaProc, Run, RunState, _iso, _now, _parse
from service.backends.local.settings import LocalSettings
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.backends.local")

WATCH_INTERVAL = 0.1           # seconds between the watcher's passes
UNCLAIMED_SECONDS = 60.0       # an adopted run no active job claims is stopped after this
LOG_TAIL_LINES = 20
S = JobState


def _marker(run: Run, rep: ReplicaProc) -> str:
    return processes.marker_value(run.job_id, rep.task)


def _log_lost(run: Run, rep: ReplicaProc, status: int | None) -> None:
    """For the operator: a wrapper that ended without its exit record was killed (a negative status)
    or failed itself (its own log, the service's file, says why: a traceback). Not in the job's
    error, which its team reads: the wrapper's log names the service's own paths."""
    try:
        with open(run.dir.wrapper_log(rep.task), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 2048))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        tail = "(no wrapper log)"
    log.warning("local run %s: replica %s's wrapper (pid %s) ended with status %s and no exit record; "
                "its log ends: %s", run.ref, rep.task, rep.pid, status, tail.strip() or "(empty)")


class Supervisor:
    def __init__(self, settings: LocalSettings, *, isolate: bool, uids: sandbox.UidPool):
        self.work_dir = settings.work_dir
        self.grace = float(settings.cancel_grace_seconds)
        self.isolate = isolate
        self.uids = uids
        self.lock = threading.RLock()   # one at a time: the backend's calls and the watcher
        self.runs: dict[uuid.UUID, Run] = {}
        self.polls = 0                  # the backend's poll passes (an adopted run's claim window)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the watcher ---------------------------------------------------------------------------

    def start(self) -> None:
        with self.lock:
            self.adopt_all()
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="local-backend-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        # Replicas keep running: the next controller on this host follows them again (docs/local.md).
        self._stop.set()
        if self._thread:
            self._thread.join(5)
            self._thread = None
        with self.lock:
            self.runs.clear()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            with self.lock:
                for job_id, run in list(self.runs.items()):
                    try:
                        self.tick(run)
                    except Exception:
                        log.exception("local run %s: watcher pass failed", run.ref)
                        continue
                    if run.gone and run.outcome is not None and (run.reported or run.orphan):
                        del self.runs[job_id]

    # -- one pass over a run -------------------------------------------------------------------

    def tick(self, run: Run) -> None:
        """Reap, notice exits, decide the outcome, stop what must stop."""
        self._refresh(run)
        now = time.monotonic()
        if run.outcome is None:
            self._decide(run)
        if run.stop_deadline is not None and not run.gone:
            if now >= run.stop_deadline:
                self._signal(run, signal.SIGKILL)
                run.killed = True
            if self._all_gone(run):
                run.gone = True
                if run.uid is not None:
                    isolation.reclaim([run.dir.work, run.output_dir])
                    self._warn_not_given_back(run)
                cgroup.remove(run.cgroup)
                if run.uid_lock is not None:  # only now may the uid go to another job
                    os.close(run.uid_lock)
                    run.uid_lock = None
                if run.outcome is None:  # a cancel ends when the last process is gone
                    run.record_outcome(S.CANCELLED, self._cancel_reason(run),
                                       {"code": 1, "message": "CANCELLED: the job was preempted" if
                                        run.stopped_for == "preempted" else
                                        "CANCELLED: the job was cancelled by request"})
                run.state.gone = True
                run.save()

    @staticmethod
    def _warn_not_given_back(run: Run) -> None:
        """What the sandbox's init could not give back of the shared folders (nsholder.py)."""
        try:
            failed = (run.dir.replicas / "give-back.txt").read_text().splitlines()
        except OSError:
            return
        log.warning("job %s: %d entries its uid %s left in TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS were not given "
                    "back to the service (the next job of that uid may reach them): %s",
                    run.job_id, len(failed), run.uid, "; ".join(failed[:5]))

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
                _log_lost(run, rep, info["wrapper_status"])
            rep.exit = info
            rep.started = run.dir.started_file(rep.task).exists()

    def _all_gone(self, run: Run) -> bool:
        wrappers_done = all(r.exit is not None or r.pid is None for r in run.replicas.values())
        if wrappers_done or run.killed:
            # Every replica's command has ended (or the grace is over): whatever the job left
            # behind (setsid, double fork, a cleared environment) dies with its namespace's
            # init, and anything in its cgroup (unsandboxed too). SIGTERM: the init kills every
            # process of its namespace, gives back the shared folders and exits; the cgroup
            # (which holds the init too) is killed only then, not to cut that short.
            if run.holder is not None and sandbox.holder_alive(*run.holder):
                sandbox.kill_holder(*run.holder, signal.SIGTERM)
            else:
                cgroup.kill_all(run.cgroup)
        if run.holder is not None or run.cgroup is not None:
            return wrappers_done and not (run.holder and sandbox.holder_alive(*run.holder)) and \
                not cgroup.members(run.cgroup)
        return wrappers_done and not any(
            processes.group_members(r.pid, _marker(run, r)) for r in run.replicas.values() if r.pid is not None)

    # -- deciding the run's outcome ------------------------------------------------------------

    def _decide(self, run: Run) -> None:
        if run.state.cancel_requested_at:
            return  # tick ends it as CANCELLED once every process is gone
        failed = [r for r in run.replicas.values() if r.failed]
        if failed:
            first = min(failed, key=lambda r: ((r.exit or {}).get("ended_at") or "~", r.pool, r.index))
            reason, error = self._failure(run, first)
            run.record_outcome(S.FAILED, reason, error, ended=_parse((first.exit or {}).get("ended_at")))
            self.begin_stop(run)
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
            run.record_outcome(S.SUCCEEDED, reason, None)
            self.begin_stop(run)
            return
        if run.timeout and (_now() - run.launched_at).total_seconds() > run.timeout:
            message = f"the job ran longer than its scheduling timeout of {run.timeout:g} s and was stopped"
            run.record_outcome(S.FAILED, message, {"code": 4, "message": message})
            self.begin_stop(run)
            return
        if run.adopted and not run.claimed and self.polls - run.adopted_polls >= 3 and \
                time.monotonic() - run.adopted_mono > UNCLAIMED_SECONDS:
            log.warning("local run %s: no active job claims it; stopping its processes", run.ref)
            run.orphan = True
            run.record_outcome(S.FAILED, "no active job in the database claims this run", None)
            self.begin_stop(run)

    def silence(self, run: Run) -> dict | None:
        """Observation.silence of a run with a stall timeout: how long its training replicas
        (chief, worker) still running have written nothing, the longest. Parameter servers and
        the evaluator are silent by design while they wait, so they are not measured. The
        lifecycle judges it (lifecycle/stalls.py) and stops the job through cancel()."""
        if not run.stall_timeout or run.outcome is not None:
            return None
        files = {rep.task: run.dir.log(rep.task) for rep in run.replicas.values()
                 if rep.exit is None and rep.pid is not None and rep.tf_role in ("chief", "worker")}
        return replica_logs.silence(files, run.launched_at.timestamp(), time.time()) if files else None

    def _failure(self, run: Run, rep: ReplicaProc) -> tuple[str, dict[str, Any]]:
        exit = rep.exit or {}
        when = " while the service was not running" if rep.exited_unwatched else ""
        tail = [line[:500] for line in replica_logs.tail(run.dir.log(rep.task), LOG_TAIL_LINES)]
        if exit.get("lost"):
            what = (f"replica {rep.label}, pid {rep.pid}, is gone without an exit status: "
                    f"it was killed (SIGKILL or the OOM killer){when}")
            code = None
        else:
            code = exit.get("exit_code")
            sig = exit.get("signal")
            what = f"replica {rep.label} exited with code {code}" + (f" (killed by {sig})" if sig else "") + when
        others = [r for r in run.replicas.values() if r is not rep and r.exit is None]
        reason = what + ("; the other replicas were stopped" if others else "")
        message = f"The replica {rep.task} " + (
            f"exited with a non-zero status of {code}." if code is not None else
            "disappeared without an exit status (killed).")
        if tail:
            message += " Last lines of its log:\n" + "\n".join(tail)
        return reason, {"code": code, "message": message, "replica": rep.task, "exit_code": code,
                        "signal": None if exit.get("lost") else exit.get("signal"),
                        "lost": bool(exit.get("lost")), "log_tail": tail}

    def _cancel_reason(self, run: Run) -> str:
        grace = self.grace if run.grace is None else run.grace
        how = (f"SIGTERM, then SIGKILL after the {grace:g} s grace period" if run.killed
               else "SIGTERM")
        return f"{run.stopped_for}: every replica was stopped ({how})"

    # -- stopping ------------------------------------------------------------------------------

    def request_cancel(self, run: Run, *, grace: float | None = None, why: str = "cancelled") -> None:
        """Stop the run for good (a cancel, or a preemption: `why`), SIGKILL after `grace`
        (None: TRAINJOBS_LOCAL_CANCEL_GRACE_SECONDS)."""
        now = _now()
        run.state.cancel_requested_at = _iso(now)
        run.grace, run.stopped_for = grace, why
        wait = self.grace if grace is None else max(0.0, grace)
        run.state.stopped_for, run.state.stop_grace = why, wait
        run.state.stop_deadline_at = _iso(now + timedelta(seconds=wait))
        run.save()
        self.begin_stop(run)

    def begin_stop(self, run: Run) -> None:
        if run.stop_deadline is None:
            run.stop_deadline = time.monotonic() + (self.grace if run.grace is None else max(0.0, run.grace))
        self._signal(run, signal.SIGTERM)

    def _signal(self, run: Run, sig: signal.Signals) -> None:
        for rep in run.replicas.values():
            if rep.pid is None:
                continue
            if rep.exit is None:
                # Our wrapper is alive, so the group number is still ours.
                processes.signal_group(rep.pid, sig)
            elif run.holder is None:
                # The leader is gone; signal only what still carries our marker.
                processes.signal_pids(processes.group_members(rep.pid, _marker(run, rep)), sig)

    # -- after a restart: following again what a previous service started -----------------------

    def adopt_all(self) -> None:
        for path in sorted(self.work_dir.iterdir()):
            try:
                job_id = uuid.UUID(path.name)
            except ValueError:
                continue
            rd = RunDir(path)
            try:
                raw = rd.read_state()
                state = RunState.from_json(raw) if raw is not None else None
                if state is None or state.gone or job_id in self.runs:
                    continue
                self.adopt(rd, state)
            except Exception:
                log.exception("local run %s: could not be followed again", path)

    def load(self, rd: RunDir) -> Run | None:
        """The run recorded in `rd`, followed from now on; None if none was launched there."""
        raw = rd.read_state()
        return self.adopt(rd, RunState.from_json(raw)) if raw is not None else None

    def adopt(self, rd: RunDir, state: RunState) -> Run:
        run = Run.of_state(rd, state)
        run.adopted, run.adopted_mono, run.adopted_polls = True, time.monotonic(), self.polls
        self.runs[run.job_id] = run
        self._refresh(run)
        for rep in run.replicas.values():
            rep.exited_unwatched = rep.exit is not None
        if run.gone:
            return run
        if self.isolate and run.uid is not None and state.holder is None:
            run.uid_lock = self.uids.relock(run.uid)  # an unsandboxed run: the service holds its uid
        elif state.holder is not None and state.holder.lock_fd is not None:
            run.uid_lock = sandbox.lock_of_holder(state.holder.pid, state.holder.create_time, state.holder.lock_fd)
        if state.phase == "launching" and run.outcome is None:
            # The service died while starting the replicas: some may run without a recorded pid.
            sandbox.kill_orphan_holders(rd.path)  # started, but the crash came before state.json said so
            for rep in run.replicas.values():
                if rep.pid is None:
                    processes.signal_pids(processes.find_marked(_marker(run, rep)), signal.SIGKILL)
            reason = "the service stopped while starting this job's replicas; the ones started were stopped"
            run.record_outcome(S.FAILED, reason, {"code": None, "message": reason})
        if state.cancel_requested_at:
            # The stop the previous service began goes on as it was: a preemption stays one, and
            # SIGKILL comes when it was due, not a fresh grace from the restart.
            run.stopped_for = state.stopped_for or run.stopped_for
            run.grace = state.stop_grace
            due = _parse(state.stop_deadline_at)
            if due is not None:
                run.stop_deadline = time.monotonic() + max(0.0, (due - _now()).total_seconds())
        if run.outcome is not None or state.cancel_requested_at:
            self.begin_stop(run)  # finish what the previous service had begun
        alive = [r.task for r in run.replicas.values() if r.exit is None and r.pid is not None]
        log.info("local run %s: followed again after a restart (alive: %s)", rd.path, ", ".join(alive) or "none")
        return run
