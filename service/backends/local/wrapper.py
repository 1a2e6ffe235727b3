"""Runs one replica's command and keeps a record that outlives the service.

    python -I -S wrapper.py --log L --started S --exit E [--uid U] [--cgroup DIR]  < spec.json

The replica's command, environment and working directory come as one JSON object
on stdin ({"argv": [...], "env": {...}, "cwd": "...", "join": PID}), never in this process's
own environment or arguments: the wrapper runs as root with the fixed environment
the service gave it, and the template's env (LD_PRELOAD, GCONV_PATH, ...) is
applied only by the execve() that follows the drop to the job's uid. With "join"
it first enters the namespaces of the job's sandbox (nsholder.py, PID 1 given by
its host pid), so the command starts inside them while the wrapper itself stays
in the host's PID namespace (a restarted service still finds it by pid).

Started by the local backend, one per replica, as the leader of a new process
group (the command runs in that group, so one killpg reaches it and its
children). It copies the command's stdout and stderr line by line into the
replica's log file, each line prefixed with the time it was read, writes a
"started" file once the command runs and an "exit" file with its exit status
when it ends, then exits with the same status. The exit file is how a
restarted service learns how a replica ended: after a restart the service is
no longer the replica's parent and cannot waitpid() it.

Standard library only, and run by path with -I -S: it must start in
milliseconds and must never import the service (or TensorFlow).

Log record format (read by service.backends.replica_logs), one per line:
    2026-01-31T12:00:00.123456Z stdout the line as the program wrote it
Timestamps are taken here, as each line is read from the pipe, so they stay
true when the logs are read later (after a restart, or by a slow client).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

MAX_LINE = 64 * 1024  # longer lines are split into several records
HERE = os.path.dirname(os.path.abspath(__file__))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # readers never see half a file


class LogWriter:
    def __init__(self, path: str):
        # Unbuffered append: each record is one write(), so a reader sees whole
        # records (it also ignores a trailing partial line).
        self._f = open(path, "ab", buffering=0)
        self._lock = threading.Lock()

    def record(self, stream: str, text: bytes) -> None:
        data = b"%s %s %s\n" % (_now().encode(), stream.encode(), text)
        with self._lock:
            self._f.write(data)

    def close(self) -> None:
        self._f.close()


# setns() order: the mount namespace last, it changes this process's root and cwd.
NAMESPACES = (("net", 0x40000000), ("ipc", 0x08000000), ("uts", 0x04000000), ("pid", 0x20000000),
              ("mnt", 0x00020000))


def _setns(fd: int, flag: int, what: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, flag) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot join {what}: {os.strerror(err)}")
    os.close(fd)


def join_namespaces(init_pid: int) -> int:
    """Enter the job sandbox's namespaces, so children are born in its PID namespace.
    Returns an fd of our own PID namespace: while children would be born elsewhere, the
    kernel refuses threads (CLONE_THREAD), so the wrapper goes back before starting any."""
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
    fds = [(os.open(f"/proc/{init_pid}/ns/{name}", os.O_RDONLY), flag) for name, flag in NAMESPACES]
    for fd, flag in fds:
        _setns(fd, flag, f"the job's sandbox (pid {init_pid})")
    os.chdir("/")
    return own_pid_ns


def _pump(pipe, stream: str, log: LogWriter) -> None:
    with pipe:
        while True:
            line = pipe.readline(MAX_LINE)
            if not line:
                return
            log.record(stream, line.rstrip(b"\r\n").replace(b"\n", b" "))


def _job_filter():
    """jobfilter.install, loaded from the host's files before the job's mounts are joined."""
    sys.path.insert(0, HERE)
    import jobfilter

    return jobfilter.install


def main(argv: list[str]) -> int:
    # One function on purpose (over 60 lines): this file runs standalone in every replica's
    # wrapper, and its privileged steps (spec, cgroup, namespaces, filter, uid drop, exec,
    # records) share the child and the log in order, read top to bottom.
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--started", required=True)
    p.add_argument("--exit", required=True)
    # The wrapper stays the service's user (a replica must not forge its own exit record
    # or log); only the command runs as the job's unprivileged uid.
    p.add_argument("--uid", type=int)
    p.add_argument("--cgroup", help="the job's cgroup (cgroup.py): the wrapper joins it, its command follows")
    args = p.parse_args(argv)
    spec = json.loads(sys.stdin.buffer.read())
    command, env, cwd = list(spec["argv"]), dict(spec["env"]), spec.get("cwd")
    join = spec.get("join")  # host pid of the job's sandbox init (nsholder.py), chosen by the service
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)

    # The backend stops a replica with killpg(SIGTERM): the command gets it too.
    # The wrapper outlives the command so it can record how it ended; a Python
    # handler (not SIG_IGN) is reset on exec, so the command keeps the default.
    terminated: list[int] = []

    def _note(signum, _frame):
        terminated.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _note)

    log = LogWriter(args.log)
    try:
        if args.cgroup:
            with open(os.path.join(args.cgroup, "cgroup.procs"), "w") as f:
                f.write("0")
        confine = _job_filter() if args.uid is not None else None
        own_pid_ns = join_namespaces(int(join)) if join is not None else None
        if confine is not None:
            confine()  # no user namespace, no keyring: for the command and all it starts
        drop = {} if args.uid is None else {"user": args.uid, "group": args.uid, "extra_groups": [],
                                            "umask": 0o077}
        # With a uid to drop to, subprocess forks (never vfork): allowed across PID namespaces.
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, close_fds=True, env=env, cwd=cwd, **drop)
        if own_pid_ns is not None:
            _setns(own_pid_ns, NAMESPACES[3][1], "the wrapper's own PID namespace")
    except OSError as e:
        log.record("stderr", f"trainjobs: cannot start {command!r}: {e}".encode())
        log.close()
        _write_json(args.exit, {"exit_code": 127, "signal": None, "ended_at": _now(),
                                "error": f"cannot start: {e}"})
        return 127
    _write_json(args.started, {"pid": child.pid, "started_at": _now()})

    pumps = [threading.Thread(target=_pump, args=(child.stdout, "stdout", log), daemon=True),
             threading.Thread(target=_pump, args=(child.stderr, "stderr", log), daemon=True)]
    for t in pumps:
        t.start()
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
            continue
    ended = _now()
    # A grandchild may still hold the pipes open; do not wait for it forever.
    deadline = time.monotonic() + 5
    for t in pumps:
        t.join(max(0.0, deadline - time.monotonic()))
    log.close()
    killed_by = -code if code < 0 else None
    _write_json(args.exit, {"exit_code": code, "signal": signal.Signals(killed_by).name if killed_by else None,
                            "ended_at": ended,
                            "terminated_by": signal.Signals(terminated[0]).name if terminated else None})
    return code if code >= 0 else 128 + (killed_by or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
