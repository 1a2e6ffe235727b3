"""Runs one task of a Slurm job on its node: the environment Vertex would give it, from
what Slurm allocated at run time.

    python -I -S launcher.py <run folder> <het group>

One `srun --het-group=G` step per role starts it once per task of that role; inside a
step SLURM_PROCID counts that role's tasks from 0, so (group, procid) names the task
in job.json. Nodes are known only now, and several tasks may share a node (and, in
small clusters, a network stack), so each task picks a free port on its node and
publishes `node:port` in tasks/<task>.addr; once every task of the job has, it writes
TF_CONFIG and CLUSTER_SPEC (the service rendered them with placeholders for the
addresses) and runs the command with a clean environment: a minimal base, the
template's env, TF_CONFIG, CLUSTER_SPEC and AIP_* under the shared output folder.

It copies the command's output into logs/<task>.log in the local wrapper's record format
(service/backends/local/wrapper.py: "<UTC time> <stream> <line>"), so the service reads
the local and slurm backends' logs with one reader, and records `started` and `exit` files. Standard
library only, copied into the run folder at submit: the nodes need no trainjobs install
and it never imports TensorFlow."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

MAX_LINE = 64 * 1024
EXIT_RENDEZVOUS = 3      # not every task published its address in time
EXIT_CANNOT_START = 127


def _now() -> str:
    # timezone.utc, not datetime.UTC: the nodes' Python may be older than 3.11.
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: UP017


def _write(path: str, text: str) -> None:
    """Into a file the service created for this task (never a new one, never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read_json(path: str):
    try:
        with open(path) as f:
            return json.loads(f.read() or "null")
    except (OSError, ValueError):
        return None


class Log:
    def __init__(self, path: str):
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        self._lock = threading.Lock()

    def record(self, stream: str, text: bytes) -> None:
        data = b"%s %s %s\n" % (_now().encode(), stream.encode(), text)
        with self._lock:
            os.write(self._fd, data)   # one write per record: readers see whole lines

    def close(self) -> None:
        os.close(self._fd)


def _pump(pipe, stream: str, log: Log) -> None:
    with pipe:
        while True:
            line = pipe.readline(MAX_LINE)
            if not line:
                return
            log.record(stream, line.rstrip(b"\r\n").replace(b"\n", b" "))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _rendezvous(run: str, job: dict, deadline: float, restart: str) -> dict | None:
    """Every task's published address, or None once the deadline passes. Only addresses of this
    run of the Slurm job count: after Slurm requeued it (restart count `restart`), the
    previous run's records name nodes and ports that are gone."""
    tasks = list(job["tasks"])
    while True:
        found = {}
        for t in tasks:
            rec = _read_json(os.path.join(run, "tasks", f"{t}.addr"))
            if isinstance(rec, dict) and isinstance(rec.get("address"), str) and \
                    str(rec.get("restart", "0")) == restart:
                found[t] = rec["address"]
        if len(found) == len(tasks):
            return found
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def _exit(run: str, task: str, record: dict) -> None:
    record.setdefault("ended_at", _now())
    record.setdefault("node", os.environ.get("SLURMD_NODENAME"))
    _write(os.path.join(run, "tasks", f"{task}.exit"), json.dumps(record))


def main(argv: list[str]) -> int:
    # One function on purpose (over 60 lines): copied to the nodes and run standalone, it is
    # the task's whole life in order (rendezvous, start, wait, record), sharing its locals.
    run, group = argv[0], int(argv[1])
    job = _read_json(os.path.join(run, "job.json"))
    task = job["groups"][group]["tasks"][int(os.environ.get("SLURM_PROCID", "0"))]
    spec = job["tasks"][task]
    log = Log(os.path.join(run, "logs", f"{task}.log"))

    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    port = _free_port()
    address = f"{node}:{port}"
    restart = os.environ.get("SLURM_RESTART_COUNT") or "0"
    _write(os.path.join(run, "tasks", f"{task}.addr"),
           json.dumps({"address": address, "node": node, "port": port, "at": _now(), "restart": restart}))
    addresses = _rendezvous(run, job, time.monotonic() + float(job["rendezvous_timeout"]), restart)
    if addresses is None:
        message = (f"trainjobs: not every task of the job published its address within "
                   f"{job['rendezvous_timeout']:g} s (TRAINJOBS_SLURM_RENDEZVOUS_TIMEOUT_SECONDS)")
        log.record("stderr", message.encode())
        _exit(run, task, {"exit_code": EXIT_RENDEZVOUS, "signal": None, "error": message})
        return EXIT_RENDEZVOUS

    env = dict(spec["env"])
    placeholder = job["placeholder"]
    for key, value in env.items():
        if placeholder in value:
            for t, a in addresses.items():
                value = value.replace(f"{placeholder}{t}@", a)
            env[key] = value
    # How often Slurm requeued the job under this id (0: its first run): a restart resumes from its checkpoints.
    env.update({"TRAINJOBS_SLURM_JOB_ID": os.environ.get("SLURM_JOB_ID", ""), "TRAINJOBS_SLURM_NODE": node,
                "TRAINJOBS_SLURM_RESTART_COUNT": restart})

    terminated: list[int] = []
    child: subprocess.Popen | None = None

    def _forward(signum, _frame):
        terminated.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, _forward)
    try:
        child = subprocess.Popen(spec["argv"], env=env, cwd=job["cwd"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
    except OSError as e:
        log.record("stderr", f"trainjobs: cannot start {spec['argv']!r}: {e}".encode())
        _exit(run, task, {"exit_code": EXIT_CANNOT_START, "signal": None, "error": f"cannot start: {e}"})
        return EXIT_CANNOT_START
    _write(os.path.join(run, "tasks", f"{task}.started"),
           json.dumps({"pid": child.pid, "node": node, "address": address, "started_at": _now()}))
    pumps = [threading.Thread(target=_pump, args=(child.stdout, "stdout", log), daemon=True),
             threading.Thread(target=_pump, args=(child.stderr, "stderr", log), daemon=True)]
    for t in pumps:
        t.start()
    code = child.wait()
    ended = _now()
    deadline = time.monotonic() + 5      # a grandchild may hold the pipes: do not wait forever
    for t in pumps:
        t.join(max(0.0, deadline - time.monotonic()))
    log.close()
    killed_by = -code if code < 0 else None
    _exit(run, task, {"exit_code": code, "signal": signal.Signals(killed_by).name if killed_by else None, "ended_at": ended,
                      "terminated_by": signal.Signals(terminated[0]).name if terminated else None})
    return code if code >= 0 else 128 + (killed_by or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
