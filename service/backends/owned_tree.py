"""Handing a folder a job has written in to another owner, as root, without ever walking a
path the job can change.

Shared by the local and slurm backends (both hand a retry's shared output folder to the
next attempt's user, and the local backend takes it back at a job's end), so it lives
beside them rather than in either: the backends stay independent of each other. A walk
by path (os.walk + lchown) lets a job swap a folder for a symlink between the listing
and the chown and make root chown any file of the host: here every entry is named
relative to its folder's descriptor and nothing is followed."""
from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 256


def _chown_walk(dir_fd: int, uid: int, gid: int, depth: int) -> None:
    """chown everything under an open folder, never through a path: each entry is named
    relative to its folder's fd, symlinks are changed and never followed, a sub-folder is
    opened with O_NOFOLLOW and must still be the entry just listed (a swap in between is
    skipped), and a file with other hard links (maybe a host file) is left alone."""
    if depth > MAX_DEPTH:
        return
    for entry in os.scandir(dir_fd):
        name = entry.name
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                try:
                    now = os.fstat(sub)
                    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                        continue  # swapped since it was listed
                    _chown_walk(sub, uid, gid, depth + 1)
                    os.fchown(sub, uid, gid)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                continue
            else:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError, OSError) as e:
            if isinstance(e, (FileNotFoundError, NotADirectoryError)) or e.errno == errno.ELOOP:
                continue  # it changed under us: whatever it is now, it is not followed
            raise


def chown_tree(top: Path, uid: int, mode: int = 0o700, gid: int | None = None) -> None:
    """Give `top` and everything in it to `uid` (group `gid`, default the same number;
    top: `mode`). `top` itself must be a real folder (not a symlink) in a folder of the
    service's; below it, see _chown_walk."""
    group = uid if gid is None else gid
    fd = os.open(top, _DIR_FLAGS)
    try:
        _chown_walk(fd, uid, group, 0)
        os.fchown(fd, uid, group)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def own_folder(path: Path, owner: tuple[int, int] | None, mode: int = 0o700) -> None:
    """A folder (made if missing) given to `owner` (uid, gid) with `mode`, through a
    descriptor: a symlink put in its place is refused (ELOOP), never followed. None: the
    service's own user keeps it."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _DIR_FLAGS)
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


# -- the operator's shared output folder (TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR, TRAINJOBS_SLURM_SHARED_OUTPUT_DIR) --
# Backends that declare the same folder keep every job's output there, <root>/<first attempt's id>, so a
# preempted job's next attempt may go on on either (lifecycle/continuation.py). The root is the service's,
# 0711: a replica passes through to its own job's folder and cannot list, create or rename anything there.
# A job's folder is 0700 and given, at each attempt's launch, to that attempt's user (a local job's own uid,
# a Slurm job's user), by descriptor as above; the local backend takes it back when its attempt ends.


def shared_job_folder(root: Path, first_attempt: object) -> Path:
    """A job's output folder in the shared root: named by its first attempt's id, which must be a
    UUID (nothing a template or a member writes becomes a path here: '../x' is refused)."""
    return root / str(uuid.UUID(str(first_attempt)))


def prepare_shared_root(root: Path) -> None:
    """The shared root made if missing (the service's), 0711 (see above); one made by the operator
    beforehand must be the service's, or the start stops here, saying so."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS)
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            raise ValueError(f"the shared output folder {root} is not this service's user's (uid {os.geteuid()}): "
                             "replicas could change what it holds; give it to the service's user, or choose another")
        os.fchmod(fd, 0o711)
    finally:
        os.close(fd)


def hand_over(top: Path, owner: tuple[int, int] | None) -> None:
    """A job's folder in the shared root (made if missing), 0700, with all it holds given to `owner`
    (None: the service's own user keeps it). Unlike a Slurm retry's own_tree, its parent (the
    shared root) is left alone."""
    own_folder(top, None)
    if owner is not None:
        chown_tree(top, owner[0], gid=owner[1])
