"""The database's named locks and the URL facts they need: a PostgreSQL advisory lock or, on
SQLite (one host by nature), an flock on a file next to the database. The controller's
leadership (service/lifecycle/leader.py) and migrations (`migration_lock`) use them."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import make_url

MIGRATE_KEY = "trainjobs/migrate"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for pg_advisory_lock."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    """The database file's absolute path; None for an in-memory database."""
    db = make_url(url).database
    if not db or db == ":memory:" or db.startswith("file::memory:"):
        return None
    return Path(db).expanduser().resolve()


def secure_database_file(path: Path | None) -> None:
    """Owner-only permissions on a SQLite database and its WAL/SHM companions (replicas of
    the local backend run on this host under other uids: none may read the database)."""
    if path is None:
        return
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            os.chmod(p, 0o600)
        except FileNotFoundError:
            pass


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as psycopg's own connect() takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def lock_file(url: str, suffix: str) -> Path:
    path = sqlite_path(url)
    if path is None:  # an in-memory database lives and dies with this process
        return Path(f"/tmp/trainjobs-memory-{os.getpid()}{suffix}")
    return path.with_name(path.name + suffix)


@contextlib.contextmanager
def migration_lock(url: str) -> Iterator[None]:
    """Hold the database's migration lock (blocking) for the duration."""
    if is_sqlite(url):
        path = lock_file(url, ".migrate.lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    import psycopg

    with psycopg.connect(libpq_url(url), autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (advisory_key(MIGRATE_KEY),))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(MIGRATE_KEY),))
