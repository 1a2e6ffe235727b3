"""One controller per database, whatever the hosts and working directories.

PostgreSQL: a session advisory lock held on a dedicated connection. PostgreSQL
releases it when that session ends (the process died, its host went away), so
another process takes over within a few seconds; losing the connection means
stepping down at once. SQLite: an exclusive lock on a file next to the database
file (SQLite is one host by nature). Either way the takeover bumps the epoch in
`controller_leases`, and the controller's writes carry it (fencing): a deposed
controller's late writes change nothing.

The same two kinds of lock serialise migrations (`migration_lock`), so replicas
that start together do not race Alembic."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import socket
from pathlib import Path
from typing import Callable, Iterator

from sqlalchemy.engine import make_url

log = logging.getLogger("trainjobs.leader")

CONTROLLER_KEY = "trainjobs/controller"
MIGRATE_KEY = "trainjobs/migrate"
WAKE_CHANNEL = "trainjobs_wake"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for pg_advisory_lock."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    """The database file's absolute path; None for an in-memory database."""
    db = make_url(url).database
    if not db or db == ":memory:" or db.startswith("file::memory:"):
        return None
    return Path(db).expanduser().resolve()


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as psycopg's own connect() takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _lock_file(url: str, suffix: str) -> Path:
    path = sqlite_path(url)
    if path is None:  # an in-memory database lives and dies with this process
        return Path(f"/tmp/trainjobs-memory-{os.getpid()}{suffix}")
    return path.with_name(path.name + suffix)


@contextlib.contextmanager
def migration_lock(url: str) -> Iterator[None]:
    """Hold the database's migration lock (blocking) for the duration."""
    if is_sqlite(url):
        path = _lock_file(url, ".migrate.lock")
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


class Leadership:
    """try_acquire() -> epoch or None; check() -> still ours; release()."""

    epoch: int | None = None

    def try_acquire(self) -> int | None:
        raise NotImplementedError

    def check(self, wait: float, on_wake: Callable[[str], None]) -> bool:
        """Wait up to `wait` seconds (calling on_wake for notifications), then say whether
        the lock is still held. False means: step down now."""
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


class PostgresLeadership(Leadership):
    def __init__(self, url: str, connect_timeout: float = 5.0) -> None:
        self.url = libpq_url(url)
        self.connect_timeout = connect_timeout
        self.conn = None

    def _connect(self):
        import psycopg

        # TCP keepalives: a controller whose host vanished loses its session (and the
        # lock) in about 15 s instead of the kernel's two hours.
        return psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout)),
                               keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3,
                               options="-c statement_timeout=5000 -c idle_in_transaction_session_timeout=0",
                               application_name="trainjobs-controller")

    def try_acquire(self) -> int | None:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self._connect()
            got = self.conn.execute("SELECT pg_try_advisory_lock(%s)", (advisory_key(CONTROLLER_KEY),)).fetchone()[0]
            if not got:
                return None
            row = self.conn.execute(
                "UPDATE controller_leases SET epoch = epoch + 1, holder = %s, acquired_at = now() "
                "WHERE name = 'controller' RETURNING epoch", (holder_id(),)).fetchone()
            if row is None:  # an unmigrated database: nothing to control yet
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(CONTROLLER_KEY),))
                return None
            self.conn.execute(f"LISTEN {WAKE_CHANNEL}")
            self.epoch = int(row[0])
            return self.epoch
        except Exception as e:  # noqa: BLE001 - the database may be down: try again later
            log.warning("controller election: %s", e)
            self._drop()
            return None

    def check(self, wait: float, on_wake: Callable[[str], None]) -> bool:
        try:
            for note in self.conn.notifies(timeout=wait):
                on_wake(note.payload)
            self.conn.execute("SELECT 1")
            return True
        except Exception as e:  # noqa: BLE001 - whatever broke, the lock may be gone
            log.error("controller: lost the database session holding the lock (%s); stepping down", e)
            self._drop()
            return False

    def _drop(self) -> None:
        self.epoch = None
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
        self.conn = None

    def release(self) -> None:
        if self.conn is not None and not self.conn.closed:
            with contextlib.suppress(Exception):
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(CONTROLLER_KEY),))
        self._drop()


class SqliteLeadership(Leadership):
    def __init__(self, url: str, engine) -> None:
        self.path = _lock_file(url, ".controller.lock")
        self.engine = engine
        self.fd: int | None = None

    def try_acquire(self) -> int | None:
        if self.fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return None
            self.fd = fd
            os.ftruncate(fd, 0)
            os.write(fd, f"{holder_id()}\n".encode())
        from datetime import datetime, timezone

        from sqlalchemy import select, update

        from service.models import ControllerLease
        try:
            with self.engine.begin() as conn:
                conn.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(
                    epoch=ControllerLease.epoch + 1, holder=holder_id(), acquired_at=datetime.now(timezone.utc)))
                epoch = conn.execute(select(ControllerLease.epoch).where(ControllerLease.name == "controller")).scalar()
        except Exception as e:  # noqa: BLE001 - locked or unmigrated: try again later
            log.warning("controller election: %s", e)
            return None
        if epoch is None:
            return None
        self.epoch = int(epoch)
        return self.epoch

    def check(self, wait: float, on_wake: Callable[[str], None]) -> bool:
        import time
        time.sleep(wait)
        # The lock file is ours while the fd is open; if someone deleted it, another
        # process could lock a new file of that name: step down rather than share.
        try:
            return self.fd is not None and os.fstat(self.fd).st_ino == os.stat(self.path).st_ino
        except OSError:
            return False

    def release(self) -> None:
        self.epoch = None
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def leadership_for(url: str, engine) -> Leadership:
    return SqliteLeadership(url, engine) if is_sqlite(url) else PostgresLeadership(url)
