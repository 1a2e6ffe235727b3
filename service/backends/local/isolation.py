"""What a local replica may see of this machine.

Replicas run code from templates and members' parameters: they are not trusted
with the service's secrets, the database or other jobs. So a replica:

- never inherits the service's environment: it gets a minimal base (PATH, HOME
  and TMPDIR inside its run folder, LANG) plus the Vertex variables and the
  template's env (which validation has already screened, service.jobspec);
- when the service runs as root, runs as an unprivileged uid of its own job
  (from TRAINJOBS_LOCAL_REPLICA_UID_BASE/COUNT): it cannot read the database
  file (0600), the service's /proc entries, or another job's run folder (0700,
  owned by that job's uid). The wrapper that records its logs and exit status
  stays root, so a replica cannot forge them;
- as root, runs inside the job's namespaces (sandbox.py, nsholder.py): a root with
  only what a replica needs, its own /tmp, processes and loopback network, and a
  seccomp filter (jobfilter.py: no user namespace, no keyring, no io_uring);
- root never chowns through a path a job can change (chown_tree: fd-relative,
  O_NOFOLLOW).

docs/local.md says exactly what this does and does not protect."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from service.backends.owned_tree import chown_tree

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def base_env(python: str, home: Path, tmp: Path) -> dict[str, str]:
    return {
        "PATH": os.path.dirname(python) + os.pathsep + BASE_PATH,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # Replica output is read line by line as it comes (progress, live logs).
        "PYTHONUNBUFFERED": "1",
    }


def isolating() -> bool:
    """Separate uids are possible only when the service is root."""
    return os.geteuid() == 0


def own_dir(path: Path, uid: int | None, mode: int = 0o700) -> None:
    """A folder of a run being created (its parents are the service's): nothing of a job
    has run in it yet."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if uid is not None:
            os.fchown(fd, uid, uid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def own_tree(top: Path, uid: int | None) -> None:
    """Hand a folder and everything in it to `uid` (0700), e.g. a retry's shared checkpoints.
    None: the service's own user keeps it."""
    top.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        chown_tree(top, uid)


def reclaim(paths: list[Path]) -> None:
    """Give a finished job's files back to the service (owner-only), so the next job to
    get the same uid cannot read them."""
    me = os.geteuid()
    for top in paths:
        try:
            chown_tree(top, me)
        except FileNotFoundError:
            continue


def unreachable_ancestor(path: Path) -> Path | None:
    """The first ancestor of `path` an unprivileged uid cannot pass through (no o+x)."""
    for d in [*reversed(path.resolve().parents), path.resolve()]:
        try:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return d
        except FileNotFoundError:
            return None
    return None


def closed_to_others(executable: str) -> Path | None:
    """The first part of the interpreter's real path that an unprivileged uid cannot
    reach or execute (e.g. a pyenv Python under root's 0700 home), else None."""
    real = Path(os.path.realpath(executable))
    blocked = unreachable_ancestor(real.parent)
    if blocked is not None:
        return blocked
    return None if os.stat(real).st_mode & stat.S_IXOTH else real
