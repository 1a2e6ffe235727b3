"""One pids cgroup per local job: every process of the job, however it detached, is
in it (a child stays in its parent's cgroup; only root may move it), so the job's
processes are listed, limited (TRAINJOBS_LOCAL_MAX_PROCESSES_PER_JOB: a fork bomb
stops there, not at the host's limit) and killed by reading one file.

cgroup v1 (the pids hierarchy at /sys/fs/cgroup/pids) and v2 (the unified one,
where the pids controller must be enabled for our subtree). Where neither can be
written (not root, a container) a job simply has no cgroup: the PID namespace
still ends it (sandbox.py), and `available()` says why at start.

The sandbox's init and each wrapper put themselves into it (--cgroup DIR) before
they start anything, with a path the service chose."""
from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

V1 = Path("/sys/fs/cgroup/pids")
V2 = Path("/sys/fs/cgroup")
TOP = "trainjobs"  # job ids are UUIDs, unique across deployments on one host


def _root() -> Path | None:
    if (V1 / "cgroup.procs").exists():
        return V1 / TOP
    if (V2 / "cgroup.controllers").exists():
        return V2 / TOP
    return None


def available() -> str | None:
    """None if job cgroups can be made here, else why not (one line)."""
    root = _root()
    if root is None:
        return "no pids cgroup hierarchy at /sys/fs/cgroup"
    try:
        root.mkdir(exist_ok=True)
        if root.parent == V2:  # v2: the controller must reach our subtree, then its children
            if "pids" not in (V2 / "cgroup.subtree_control").read_text().split():
                (V2 / "cgroup.subtree_control").write_text("+pids")
            (root / "cgroup.subtree_control").write_text("+pids")
    except OSError as e:
        return f"cannot create {root}: {e.strerror}"
    return None


def path_of(job_id: uuid.UUID) -> Path | None:
    root = _root()
    return None if root is None else root / str(job_id)


def create(job_id: uuid.UUID, max_processes: int) -> Path | None:
    """The job's cgroup, made and limited; None where cgroups are not available."""
    path = path_of(job_id)
    if available() is not None or path is None:
        return None
    path.mkdir(exist_ok=True)
    if max_processes > 0:
        (path / "pids.max").write_text(str(max_processes))
    return path


def join(path: str | os.PathLike) -> None:
    """Move the calling process into the cgroup (its future children follow)."""
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write("0")


def members(path: Path | None) -> list[int]:
    if path is None:
        return []
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def kill_all(path: Path | None) -> None:
    if path is None:
        return
    kill = path / "cgroup.kill"  # v2, Linux >= 5.14: the kernel kills them all, forks included
    if kill.exists():
        try:
            kill.write_text("1")
            return
        except OSError:
            pass
    for pid in members(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def remove(path: Path | None) -> None:
    """The cgroup of a job none of whose processes is left."""
    if path is not None:
        try:
            path.rmdir()
        except (FileNotFoundError, OSError):
            pass
