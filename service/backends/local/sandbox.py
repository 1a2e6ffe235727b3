"""A local job's sandbox, seen from the service: its namespaces' init (nsholder.py),
its uid, and how a replica is started inside it (wrapper.py).

- Every root-side process (the init, the wrappers) starts with FIXED_ENV and
  arguments the service chose (paths, numbers); the replica's command and
  environment reach the wrapper as JSON on a pipe and are used only by the
  execve() after the drop to the job's uid (see wrapper.py).
- A uid is handed out under a host-wide lock (one file per uid in UID_LOCK_DIR,
  flock()ed): the job's init inherits the lock and holds it until it dies, and
  with it every process of the job. So two deployments on one host never share
  a uid at once, and a uid is never given while a process still has it (also
  checked in /proc, for a process that escaped by other means). Files: the job
  can write only its run folder (nothing else of the run folders is even there),
  which is given back to the service when the job ends (isolation.reclaim), and the
  operator's shared folders, where the init gives its leftovers to root (shared.py).

docs/local.md has the threat model."""
from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from service.backends.local import processes

log = logging.getLogger("trainjobs.backends.local")

HOLDER = str(Path(__file__).with_name("nsholder.py"))
WRAPPER = str(Path(__file__).with_name("wrapper.py"))
# The whole environment of a root-side helper: nothing of the service, nothing of the template.
FIXED_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
UID_LOCK_DIR = Path("/run/trainjobs/replica-uids")  # host-wide on purpose: every deployment shares it
FIRST_PORT = 2222  # inside a job's own network namespace every port is free; Vertex uses 2222 too
HOLDER_START_TIMEOUT = 10.0


class SandboxError(OSError):
    pass


def helper_python() -> list[str]:
    """How root-side helpers run: the service's interpreter, isolated (-I: no PYTHON* variables,
    no user site) and without site (-S): they import only the standard library."""
    return [sys.executable, "-I", "-S"]


def probe() -> str | None:
    """None if this machine can make a job's namespaces and install its seccomp filter
    (jobfilter.py), else why not (one line)."""
    try:
        out = subprocess.run([*helper_python(), "-c",
                              "import sys; sys.path.insert(0, sys.argv[1]); import nsholder as n, jobfilter as f; "
                              "n.unshare(n.NAMESPACES); f.install()", str(Path(HOLDER).parent)],
                             env=FIXED_ENV, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {out.returncode}"


# -- uids ---------------------------------------------------------------------------------

def _uids_with_processes() -> set[int]:
    uids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uids.add(os.stat(f"/proc/{name}").st_uid)
            except OSError:
                continue
    return uids


class UidPool:
    """Uids [base, base + count), each behind a host-wide lock file. Handed out round-robin,
    so a freed uid is the last to be given again."""

    def __init__(self, base: int, count: int, lock_dir: Path = UID_LOCK_DIR):
        self.base, self.count, self.lock_dir = base, count, lock_dir
        self._next = 0

    def acquire(self) -> tuple[int, int]:
        """(uid, fd of its lock): keep the fd open as long as anything of the job may live."""
        self.lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        busy = _uids_with_processes()
        for i in range(self.count):
            uid = self.base + (self._next + i) % self.count
            if uid in busy:
                continue
            fd = os.open(self.lock_dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._next = (uid - self.base + 1) % self.count
            return uid, fd
        raise OSError(f"all {self.count} replica uids from {self.base} are in use on this host "
                      "(raise TRAINJOBS_LOCAL_REPLICA_UID_COUNT, or move TRAINJOBS_LOCAL_REPLICA_UID_BASE)")

    def relock(self, uid: int) -> int | None:
        """After a restart, an unsandboxed run's uid: its lock again (None if another holds it)."""
        fd = os.open(self.lock_dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
            return None


def lock_of_holder(pid: int, created: float | None, fd: int) -> int | None:
    """After a restart, our own handle on the uid lock a job's init holds (its fd `fd`):
    pidfd_getfd() duplicates it, the same open file, so the lock stays held until both
    are closed, and the service can keep the uid until the job's files are given back
    (a fresh open would only wait for the init's death). None if the init is gone."""
    import ctypes

    if not processes.is_alive(pid, created):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pidfd = libc.syscall(ctypes.c_long(434), ctypes.c_int(pid), ctypes.c_uint(0))  # pidfd_open
    if pidfd < 0:
        return None
    try:
        got = libc.syscall(ctypes.c_long(438), ctypes.c_int(pidfd), ctypes.c_int(fd), ctypes.c_uint(0))  # getfd
        return got if got >= 0 else None
    finally:
        os.close(pidfd)


# -- the job's init ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HolderPlan:
    """What a job's init is told (nsholder.py): folders the job may write (its run folder, a
    retry's first output, the shared ones) and read (the interpreter's environments, the
    project's code), the service's run folders to cover in what it reads, its uid (known by
    name inside), the run folder and idle time that end it by itself, its cgroup, and the
    shared folders where what the uid leaves is given to root when the job ends (shared.py)."""
    writable: list[Path]
    visible: list[Path]
    hidden: list[Path] = field(default_factory=list)
    uid: int | None = None
    run: Path | None = None
    idle_seconds: float = 60.0
    cgroup: Path | None = None
    give_back: list[Path] = field(default_factory=list)

    def argv(self) -> list[str]:
        out = ["--cgroup", str(self.cgroup)] if self.cgroup is not None else []
        for flag, paths in (("--writable", self.writable), ("--visible", self.visible), ("--hidden", self.hidden),
                            ("--give-back", self.give_back)):
            for p in paths:
                out += [flag, str(p)]
        if self.uid is not None:
            out += ["--uid", str(self.uid)]
        if self.run is not None:
            out += ["--run", str(self.run)]
        return out + ["--idle", repr(float(self.idle_seconds))]


def start_holder(plan: HolderPlan, lock_fd: int | None) -> tuple[int, float | None]:
    """Start the job's namespaces; (host pid of its init, its start time) once set up."""
    return holder_ready(begin_holder(plan, lock_fd))


def begin_holder(plan: HolderPlan, lock_fd: int | None) -> subprocess.Popen:
    """Start setting up the job's namespaces; holder_ready() waits for them. In between
    the replicas' wrappers start (an interpreter each): the two overlap."""
    argv = [*helper_python(), HOLDER, *plan.argv()]
    keep = (lock_fd,) if lock_fd is not None else ()
    if lock_fd is not None:
        os.set_inheritable(lock_fd, True)
    try:
        proc = subprocess.Popen(argv, env=FIXED_ENV, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=keep, start_new_session=True, text=True)
    finally:
        if lock_fd is not None:
            os.set_inheritable(lock_fd, False)
    return proc


def holder_ready(proc: subprocess.Popen) -> tuple[int, float | None]:
    pid, ready, error = None, False, None
    deadline = time.monotonic() + HOLDER_START_TIMEOUT
    assert proc.stdout is not None and proc.stderr is not None, "begin_holder pipes both"
    with proc.stdout:
        for line in proc.stdout:  # the init closes it once ready; EOF ends the loop otherwise
            word, _, rest = line.strip().partition(" ")
            if word == "pid":
                pid = int(rest)
            elif word == "ready":
                ready = True
            elif word == "error":
                error = rest
            if (pid and ready) or error or time.monotonic() > deadline:
                break
    proc.wait(HOLDER_START_TIMEOUT)
    stderr = proc.stderr.read().strip()
    proc.stderr.close()
    if not (pid and ready):
        if pid:
            kill_holder(pid, None)
        raise SandboxError(f"the job's sandbox could not be set up: {error or stderr or 'no answer'}")
    return pid, processes.start_time(pid)


def holder_alive(pid: int | None, created: float | None) -> bool:
    return pid is not None and processes.is_alive(pid, created)


def kill_holder(pid: int | None, created: float | None, sig: int = signal.SIGKILL) -> None:
    """Signal the job's init. SIGKILL: the kernel kills every process of its PID namespace with it.
    SIGTERM (the end of a job): the init SIGKILLs every other process of its namespace itself, gives
    what they left in the shared folders to root, and exits (nsholder.py); the job cannot block it."""
    if pid is not None and (created is None or processes.is_alive(pid, created)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


# -- a replica ---------------------------------------------------------------------------------

def spawn_wrapper(*, log: Path, started: Path, exit: Path, wrapper_log: Path, uid: int | None,
                  cgroup: Path | None = None) -> subprocess.Popen:
    """Start a replica's wrapper (root, FIXED_ENV, service-chosen arguments). It waits for
    its command and environment on stdin (send_spec)."""
    flags = ["--log", str(log), "--started", str(started), "--exit", str(exit)]
    if uid is not None:
        flags += ["--uid", str(uid)]
    if cgroup is not None:
        flags += ["--cgroup", str(cgroup)]
    with open(wrapper_log, "ab") as err:
        return subprocess.Popen([*helper_python(), WRAPPER, *flags], env=FIXED_ENV, cwd="/",
                                stdin=subprocess.PIPE, stdout=err, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def send_spec(popen: subprocess.Popen, *, argv: list[str], env: dict[str, str], cwd: Path,
              join: int | None) -> None:
    """The replica's command, environment and working directory, and the sandbox to join
    (its init's host pid), to a wrapper from spawn_wrapper()."""
    assert popen.stdin is not None, "spawn_wrapper pipes its stdin"
    try:
        with popen.stdin:
            popen.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": str(cwd), "join": join}).encode())
    except BrokenPipeError:
        pass  # it died at once: its exit (or the lack of one) says so
    popen.stdin = None


def kill_orphan_holders(run_dir: Path) -> None:
    """The init of a run whose launch a crash cut short before its pid was recorded."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if HOLDER in cmd and str(run_dir) in cmd:
            try:
                p.kill()
            except psutil.Error:
                pass
