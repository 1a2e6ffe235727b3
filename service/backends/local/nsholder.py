"""The init of one local job's sandbox: its PID, network, mount, IPC and UTS namespaces.

    python -I -S nsholder.py [--cgroup DIR] --writable DIR [--writable DIR ...] [--visible DIR ...]

Started by the local backend (as root, with a fixed environment the service
chose: nothing of the template's) once per job, before any replica. It unshares
the namespaces and forks; the child is PID 1 of the job's PID namespace:

- the machine read-only and nosuid (recursively), with fresh tmpfs on /tmp,
  /var/tmp and /dev/shm, and a /proc of the job's own PID namespace: a replica
  sees only its job's processes and can write only the --writable folders (its
  run folder, and a retry's first attempt's output); --visible folders hidden
  under a tmpfs (a checkout under /tmp) are bound back read-only;
- a network namespace with only its loopback up: the replicas reach each other
  on 127.0.0.1 and nothing else of the host (database, Redis, API, other jobs);
- it reaps orphans forever. When the backend SIGKILLs it, the kernel kills every
  process of the namespace, however it detached (setsid, double fork, cleared
  environment): nothing of a job outlives it.

It also keeps open whatever fds it inherits (the host-wide lock of the job's
uid, see sandbox.py): the uid is free again only when this process is gone.

The wrappers (wrapper.py) join these namespaces with setns() before starting a
replica. Standard library only (ctypes), run by path with -I -S.

Protocol on stdout: the line "pid <host pid of PID 1>", then "ready" once the
namespaces are set up, or "error <why>" and exit status 1."""
from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
SYS_MOUNT_SETATTR = 442  # same number on x86_64 and aarch64 (new syscall table)
O_PATH = getattr(os, "O_PATH", 0o10000000)
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s):
        return (s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def read_only_everywhere() -> None:
    """Every mount of this namespace read-only and nosuid, in one call (Linux >= 5.12)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    _libc.syscall.restype = ctypes.c_long
    _check(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), b"/",
                         ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
           "mount_setattr / read-only")


def loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def set_up(writable: list[str], visible: list[str]) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing of ours propagates to the host
    # O_PATH handles, taken before a tmpfs may cover them, to bind them back after.
    held = {p: os.open(p, O_PATH | os.O_DIRECTORY) for p in writable + visible}
    read_only_everywhere()
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # this PID namespace's
    covered = [d for d in PRIVATE_TMP if os.path.isdir(d) and not os.path.islink(d)]
    for d in covered:
        mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for p in sorted(writable + visible, key=lambda p: p.count("/")):  # a parent before its children
        if any(_under(p, d) for d in covered):
            os.makedirs(p, exist_ok=True)  # in the fresh tmpfs: only this process wrote it
        mount(f"/proc/self/fd/{held[p]}", p, None, MS_BIND | MS_REC)
        ro = 0 if p in writable else MS_RDONLY
        mount(None, p, None, MS_REMOUNT | MS_BIND | MS_NOSUID | ro)
        os.close(held[p])
    loopback_up()
    socket.sethostname("trainjob")


def reap_forever() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        signal.sigwait({signal.SIGCHLD})
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break


def main(argv: list[str]) -> int:
    writable: list[str] = []
    visible: list[str] = []
    cgroup: list[str] = []
    it = iter(argv)
    for flag in it:
        {"--writable": writable, "--visible": visible, "--cgroup": cgroup}.get(flag, []).append(next(it))
    out = sys.stdout
    try:
        for path in cgroup:  # the job's cgroup (cgroup.py): everything started from here stays in it
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write("0")
        unshare(NAMESPACES)
    except OSError as e:
        print(f"error {e}", file=out, flush=True)
        return 1
    child = os.fork()
    if child:
        print(f"pid {child}", file=out, flush=True)
        return 0  # the child reports "ready" itself; it is re-parented, the backend follows it by pid
    try:
        set_up(writable, visible)
    except OSError as e:
        print(f"error {e}", file=out, flush=True)
        os._exit(1)
    print("ready", file=out, flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    reap_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
