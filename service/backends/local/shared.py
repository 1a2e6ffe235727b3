"""What a job leaves in the operator's shared folders (TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS)
becomes the service's when it ends, before its uid is free again.

A job's uid is reused (a pool of TRAINJOBS_LOCAL_REPLICA_UID_COUNT, by any team): a file it
left 0600 in a shared dataset cache would otherwise be readable and writable by the next job
given the same uid. So once no process of the job is left, every entry of a shared folder
owned by (or grouped to) the job's uid is given to the service's user and group, with its
set-id bits and POSIX ACLs removed first (an ACL naming the uid would survive a chown); its
other permission bits stay: what the job published (0644, a 0777 folder) stays published
to every later job, what it kept to itself (0600) is nobody's but the service's.

Other jobs of other uids may be running and changing these folders during the walk, so it
never acts through a path: each entry is opened O_PATH|O_NOFOLLOW relative to its folder's
descriptor and everything is done on that descriptor (fchownat AT_EMPTY_PATH; chmod and
removexattr through /proc/self/fd, which reaches the opened inode and nothing else); a
sub-folder is reopened from that descriptor, never by name. Entries of another owner (a
host file hard-linked in, another job's) are left as they are. Symlinks, FIFOs and sockets
are given back like files (nothing is followed or opened for reading). A folder deeper than
MAX_DEPTH is not entered but closed: root's, 0700, so no job reaches what it holds."""
from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

O_PATH = getattr(os, "O_PATH", 0o10000000)
AT_EMPTY_PATH = 0x1000
MAX_DEPTH = 256
ACLS = ("system.posix_acl_access", "system.posix_acl_default")
_libc = ctypes.CDLL(None, use_errno=True)


def give_back(tops: Iterable[Path], uid: int, skip: Iterable[Path] = ()) -> list[str]:
    """Give every entry of `tops` owned by `uid` to this process's user (see above); `skip`:
    folders not to enter (the service's run folders: the job's own is reclaimed apart).
    Returns what could not be given back (path and why), for the caller to report."""
    skipped = {(st.st_dev, st.st_ino) for st in (_stat(p) for p in skip) if st is not None}
    failed: list[str] = []
    for top in tops:
        try:
            fd = os.open(top, O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone, or a symlink now: the sandbox bound what it resolved at launch
        try:
            _walk(fd, str(top), uid, skipped, failed, 0)
        finally:
            os.close(fd)
    return failed


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _walk(dir_fd: int, where: str, uid: int, skip: set, failed: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        # Not entered (a job can nest folders deeper than any walk goes, to hide a file of its
        # uid at the bottom): closed instead, whoever's it is, so no job reaches what is below.
        os.chmod(f"/proc/self/fd/{dir_fd}", 0o700)
        _chown(dir_fd)
        return
    try:
        listing = os.open(f"/proc/self/fd/{dir_fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        failed.append(f"{where}: {e.strerror}")
        return
    try:
        names = [e.name for e in os.scandir(listing)]
    finally:
        os.close(listing)
    for name in names:
        try:
            fd = os.open(name, O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            continue  # removed since it was listed
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in skip:
                _walk(fd, f"{where}/{name}", uid, skip, failed, depth + 1)
            if uid in (st.st_uid, st.st_gid):
                _take(fd)
        except OSError as e:
            failed.append(f"{where}/{name}: {e.strerror}")
        finally:
            os.close(fd)


def _take(fd: int) -> None:
    """Set-id bits and ACLs off (not on a symlink: it has neither), then the service's."""
    st = os.fstat(fd)  # now: a folder's walk may have changed it
    if not stat.S_ISLNK(st.st_mode):
        inode = f"/proc/self/fd/{fd}"
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            os.chmod(inode, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
        for name in ACLS:
            try:
                os.removexattr(inode, name)
            except OSError as e:
                if e.errno not in (errno.ENODATA, errno.EOPNOTSUPP, errno.ENOTSUP):
                    raise
    _chown(fd)


def _chown(fd: int) -> None:
    if _libc.fchownat(fd, b"", os.geteuid(), os.getegid(), AT_EMPTY_PATH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
