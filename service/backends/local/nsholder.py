"""The init of one local job's sandbox: its PID, network, mount, IPC and UTS namespaces.

    python -I -S nsholder.py [--cgroup DIR] [--uid UID] [--run DIR] [--idle SECONDS]
                             --writable DIR ... [--visible DIR ...] [--hidden DIR ...] [--give-back DIR ...]

Started by the local backend (as root, with a fixed environment the service
chose: nothing of the template's) once per job, before any replica. It unshares
the namespaces and forks; the child is PID 1 of the job's PID namespace:

- a mount namespace from nothing (set_up): an empty tmpfs root, pivoted to, into
  which only what a replica needs is bound at the same paths (/usr, /lib*, a
  minimal /etc written afresh, a few /dev nodes, the --visible folders read-only,
  the --hidden ones covered empty, the --writable ones read-write), fresh /tmp,
  /var/tmp, /dev/shm, a /proc of the job's own PID namespace and a /sys with no
  cgroup in it. No host socket, no other job's folder: they are not there;
- a network namespace with only its loopback up: the replicas reach each other
  on 127.0.0.1 and nothing else of the host (database, Redis, API, other jobs);
- it reaps orphans until the backend SIGKILLs it: the kernel then kills every
  process of the namespace, however it detached (setsid, double fork, cleared
  environment): nothing of a job outlives it. With no service to do so (one
  stopped for good) it ends by itself (Watch): once --run is deleted, once no
  process of the job has run in it for --idle seconds, or on SIGTERM (how the backend
  ends it). Before it exits, with every process of the job dead, it gives what the job's
  uid left in the --give-back folders (the operator's shared folders) to root (shared.py),
  so nothing of the job is the next job of its uid's; what it could not give back it lists
  in <run>/replicas/give-back.txt.

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
import stat
import struct
import sys
import time
from collections.abc import Callable

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


def loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


# What a replica needs of the host, bound read-only at the same paths in an empty root.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl", "ca-certificates", "ca-certificates.conf", "pki",
       "localtime", "timezone", "alternatives", "protocols", "services", "mime.types", "os-release",
       "host.conf", "gai.conf", "python3", "matplotlibrc")
DEV = ("null", "zero", "full", "random", "urandom", "tty", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
       "nvidia-modeset", "nvidia-caps", "dri") + tuple(f"nvidia{i}" for i in range(16))
STAGE = "/tmp"  # the new root is built on a tmpfs mounted here (in this namespace only), then pivoted to
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def etc_files(uid: int | None) -> dict[str, str]:
    """The /etc a replica gets written afresh: its own uid known by name (getpwuid), only
    local names (no DNS, nor any host database: LDAP, systemd...), nothing of the host's users."""
    users = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    groups = "root:x:0:\n"
    if uid is not None:
        users += f"trainjob:x:{uid}:{uid}:trainjob:/:/usr/sbin/nologin\n"
        groups += f"trainjob:x:{uid}:\n"
    users += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    groups += "nogroup:x:65534:\n"
    return {"passwd": users, "group": groups, "hostname": "trainjob\n", "resolv.conf": "",
            "hosts": "127.0.0.1\tlocalhost trainjob\n::1\tlocalhost ip6-localhost\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n"
                             "protocols: files\nservices: files\n"}


class Root:
    """The job's root being built under STAGE: every source is opened (O_PATH) before STAGE is
    covered, then bound from its descriptor; a symlink is copied as a symlink."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def hold(self, path: str) -> None:
        if path not in self.held and os.path.lexists(path):
            self.held[path] = os.open(path, O_PATH | os.O_NOFOLLOW)

    def target(self, path: str) -> str:
        return STAGE + path

    def bind(self, path: str, at: str | None = None) -> None:
        fd = self.held.get(path)
        if fd is None:
            return
        where = self.target(at or path)
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            os.makedirs(os.path.dirname(where), exist_ok=True)
            if not os.path.lexists(where):
                os.symlink(os.readlink(path), where)
            return
        if stat.S_ISDIR(st.st_mode):
            os.makedirs(where, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(where), exist_ok=True)
            if not os.path.lexists(where):
                os.close(os.open(where, os.O_WRONLY | os.O_CREAT, 0o600))
        mount(f"/proc/self/fd/{fd}", where, None, MS_BIND | MS_REC)

    def close(self) -> None:
        for fd in self.held.values():
            os.close(fd)


def _mount_setattr(path: str, set_: int, clear: int, flags: int) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    _libc.syscall.restype = ctypes.c_long
    _check(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                         ctypes.c_uint(flags), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
           f"mount_setattr {path}")


def _pivot_to(new_root: str) -> None:
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"no pivot_root number known for {os.uname().machine}")
    os.chdir(new_root)
    _libc.syscall.restype = ctypes.c_long
    _check(_libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the host's root")  # the old root was stacked under "."
    os.chdir("/")


def set_up(writable: list[str], visible: list[str], hidden: list[str], uid: int | None) -> None:
    """An empty root (tmpfs), then only what a replica needs bound in at the same paths: the system's
    code read-only, --visible read-only (the interpreter's environments, the project's code), over
    each --hidden folder (the service's run folders) an empty tmpfs, then --writable read-write (the
    job's own run folder, a retry's first output, the operator's shared folders). No /run, /var,
    /home, /root, /etc of the host, no host socket; /proc of this PID namespace, a fresh /sys (no
    cgroup mounted in it), a /dev of a few nodes, private /tmp and /var/tmp."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing of ours propagates to the host
    root = Root()
    for p in (*SYSTEM, *[f"/etc/{name}" for name in ETC], *[f"/dev/{name}" for name in DEV],
              *visible, *writable):
        root.hold(p)
    mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for d, mode in (("/tmp", "1777"), ("/var/tmp", "1777"), ("/dev", "0755")):
        os.makedirs(root.target(d), exist_ok=True)
        mount("tmpfs", root.target(d), "tmpfs", MS_NOSUID | (MS_NODEV if d != "/dev" else 0), f"mode={mode}")
    for sub in ("shm", "pts"):
        os.makedirs(root.target(f"/dev/{sub}"))
    mount("tmpfs", root.target("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                       ("stderr", "/proc/self/fd/2")):
        os.symlink(link, root.target(f"/dev/{name}"))
    for name in DEV:
        root.bind(f"/dev/{name}")
    for p in SYSTEM:
        root.bind(p)
    os.makedirs(root.target("/etc"))
    for name in ETC:
        root.bind(f"/etc/{name}")
    for name, text in etc_files(uid).items():
        with open(root.target(f"/etc/{name}"), "w") as f:
            f.write(text)
        os.chmod(root.target(f"/etc/{name}"), 0o644)
    # A parent before its children; a hidden folder (the service's run folders, inside what was
    # bound: a checkout, a shared folder) covered by an empty tmpfs before the job's own is bound in.
    visible = [p for p in visible if not any(p == d or p.startswith(d + "/") for d in SYSTEM)]  # bound already
    layers = [(p.count("/"), 0, p) for p in visible + writable] + [(p.count("/"), 1, p) for p in hidden]
    for _, hide, p in sorted(layers):
        if not hide:
            root.bind(p)
        elif os.path.isdir(root.target(p)):
            mount("tmpfs", root.target(p), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for d in ("/proc", "/sys"):
        os.makedirs(root.target(d))
    # This PID namespace's, showing a process only to its own uid (hidepid=2): the job does not see
    # this init (root), whose command line names the service's run folders and so its database.
    mount("proc", root.target("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    # sysfs of this network namespace; no cgroup hierarchy is mounted in it (no other job's cgroup)
    mount("sysfs", root.target("/sys"), "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    root.close()
    _pivot_to(STAGE)
    _mount_setattr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, AT_RECURSIVE)
    for p in ("/tmp", "/var/tmp", "/dev/shm", "/proc", *writable):
        _mount_setattr(p, 0, MOUNT_ATTR_RDONLY, 0)
    loopback_up()
    socket.sethostname("trainjob")


class Watch:
    """What ends the init by itself when no service will (one stopped for good, its run folder
    deleted): the run folder gone, or no process of the job in the namespace for `idle` seconds.
    Descriptors opened before the pivot: the run folder (its link count falls to 0 once removed)
    and the job's cgroup's parent, to leave the cgroup and remove it on the way out."""

    def __init__(self, run: str | None, cgroup: str | None, idle: float):
        self.idle = idle
        self.run = os.open(run, O_PATH | os.O_DIRECTORY) if run else None
        self.cgroup_name = os.path.basename(cgroup.rstrip("/")) if cgroup else None
        self.cgroup_parent = os.open(os.path.dirname(cgroup.rstrip("/")), os.O_RDONLY | os.O_DIRECTORY) \
            if cgroup else None

    def run_gone(self) -> bool:
        return self.run is not None and os.fstat(self.run).st_nlink == 0

    @staticmethod
    def others() -> bool:
        return any(name.isdigit() and name != "1" for name in os.listdir("/proc"))

    def release_cgroup(self) -> None:
        """Out of the job's cgroup, then remove it once the wrappers (outside this namespace,
        ending with their commands) have left it: bounded."""
        if self.cgroup_parent is None or self.cgroup_name is None:
            return
        try:
            fd = os.open("cgroup.procs", os.O_WRONLY, dir_fd=self.cgroup_parent)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        except OSError:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.rmdir(self.cgroup_name, dir_fd=self.cgroup_parent)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap_until_done(watch: Watch, give_back: Callable[[], None] | None = None) -> None:
    """Reap orphans until a SIGTERM (the service's, at the job's end: the usual end), the run
    folder's removal, or `idle` seconds with no process of the job (nothing started it again);
    then every process of the namespace is killed, what they left in the shared folders given
    back (`give_back`), and the cgroup left and removed. The uid's lock goes with this process.
    (A SIGKILL from the service ends it at once: the kernel kills the namespace.)"""
    signals = {signal.SIGCHLD, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    last_busy = time.monotonic()
    while True:
        got = signal.sigtimedwait(signals, min(1.0, watch.idle))
        _reap()
        if got is not None and got.si_signo == signal.SIGTERM:
            break
        now = time.monotonic()
        if watch.others():
            last_busy = now
        elif now - last_busy >= watch.idle:
            break
        if watch.run_gone():
            break
    try:
        os.kill(-1, signal.SIGKILL)  # as PID 1: every other process of this namespace
    except ProcessLookupError:
        pass  # none left
    deadline = time.monotonic() + 10
    while watch.others() and time.monotonic() < deadline:
        signal.sigtimedwait({signal.SIGCHLD}, 0.1)
        _reap()
    if give_back is not None:
        give_back()
    watch.release_cgroup()


def _giver(folders: list[str], uid: int | None, run: str | None) -> Callable[[], None] | None:
    """What gives the job's leftovers in the shared folders to root once it is dead (shared.py,
    imported from the host's files before the pivot). None: nothing to give back."""
    if not folders or uid is None:
        return None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import shared

    def give_back() -> None:
        # The job's own run folder (in a shared folder, as in the tests) is the service's to reclaim.
        try:
            failed = shared.give_back(folders, uid, skip=[run] if run else [])
        except OSError as e:
            failed = [f"the walk stopped: {e}"]
        if failed and run:
            try:
                with open(os.path.join(run, "replicas", "give-back.txt"), "w") as f:
                    f.write("".join(line + "\n" for line in failed))
            except OSError:
                pass  # the run folder is gone (what ended this init): no one to tell
    return give_back


def main(argv: list[str]) -> int:
    lists: dict[str, list[str]] = {f: [] for f in ("--writable", "--visible", "--hidden", "--cgroup", "--uid",
                                                    "--run", "--idle", "--give-back")}
    it = iter(argv)
    for flag in it:
        lists.setdefault(flag, []).append(next(it))
    writable, visible, cgroup = lists["--writable"], lists["--visible"], lists["--cgroup"]
    uid = int(lists["--uid"][0]) if lists["--uid"] else None
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
        watch = Watch(lists["--run"][0] if lists["--run"] else None, cgroup[0] if cgroup else None,
                      float(lists["--idle"][0]) if lists["--idle"] else 60.0)
        give_back = _giver(lists["--give-back"], uid, lists["--run"][0] if lists["--run"] else None)
        set_up(writable, visible, lists["--hidden"], uid)
    except OSError as e:
        print(f"error {e}", file=out, flush=True)
        os._exit(1)
    print("ready", file=out, flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    reap_until_done(watch, give_back)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
