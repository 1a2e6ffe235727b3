"""One controller per database, whatever the hosts and working directories.

PostgreSQL: a session advisory lock held on a dedicated connection. PostgreSQL
releases it when that session ends (the process died, its host went away), so
another process takes over within a few seconds; losing the connection means
stepping down at once. SQLite: an exclusive lock on a file next to the database
file (SQLite is one host by nature). Either way the takeover bumps the epoch in
`controller_leases`, and the controller's writes carry it (fencing): a deposed
controller's late writes change nothing.

A session can outlive its controller: packets dropped without a FIN (a partition, a
host that lost power, a proxy in between that keeps its side open) leave the server
holding the session, and the lock, for hours. So the lock is also a lease
(`lease_seconds`): the controller queries on its lock session at least every second,
and a candidate that finds the lock held by a session silent for longer than the
lease terminates that session (pg_terminate_backend) and takes the lock. The
controller itself gives up a session that cannot answer within half the lease
(tcp_user_timeout), so it has stepped down before anyone may break its lease.

The same two kinds of lock serialise migrations (service/persistence/locks.py), so
replicas that start together do not race Alembic."""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
from collections.abc import Callable
from datetime import UTC
from typing import TYPE_CHECKING, Any

from service.lifecycle.wake import CHANNEL as WAKE_CHANNEL
from service.persistence.locks import advisory_key, is_sqlite, libpq_url, lock_file

if TYPE_CHECKING:   # imported where used: a SQLite deployment needs no PostgreSQL driver
    import psycopg

log = logging.getLogger("trainjobs.leader")

CONTROLLER_KEY = "trainjobs/controller"


def _scalar(cursor: psycopg.Cursor[Any]) -> Any:
    """The one value of a query that always answers one row (a function call)."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the query answered no row")
    return row[0]


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


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
    def __init__(self, url: str, connect_timeout: float = 5.0, lease_seconds: float = 10.0) -> None:
        self.url = libpq_url(url)
        self.connect_timeout = connect_timeout
        self.lease_seconds = lease_seconds
        self._statement_ms = 5000   # the lock session's statement_timeout (set at _connect)
        self.conn: psycopg.Connection[Any] | None = None

    def _live(self) -> psycopg.Connection[Any]:
        if self.conn is None:   # dropped: the caller treats this like any lost session
            raise RuntimeError("the controller's lock session is closed")
        return self.conn

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        # Both ends give up on a session that stops answering. Client: keepalives for an
        # idle connection, tcp_user_timeout for the heartbeat query left unacknowledged (a
        # partition): the controller steps down after half the lease, before a candidate
        # may break it. Server (per-session settings, sent as options): the same for the
        # server's side of the socket, so a vanished controller's session (and lock) ends
        # by itself when nothing stands between the two. What a proxy in between hides
        # from both, the lease (_break_stale) covers.
        half_ms = max(1000, int(self.lease_seconds * 500))
        idle = max(1, int(self.lease_seconds / 4))
        self._statement_ms = min(5000, half_ms)
        server = (f"-c statement_timeout={self._statement_ms} -c idle_in_transaction_session_timeout=0 "
                  f"-c tcp_keepalives_idle={idle} -c tcp_keepalives_interval=1 -c tcp_keepalives_count=3 "
                  f"-c tcp_user_timeout={half_ms}")
        return psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout)),
                               keepalives=1, keepalives_idle=idle, keepalives_interval=1, keepalives_count=3,
                               tcp_user_timeout=half_ms, options=server,
                               application_name="trainjobs-controller")

    def _try_lock(self) -> bool:
        return bool(_scalar(self._live().execute("SELECT pg_try_advisory_lock(%s)", (advisory_key(CONTROLLER_KEY),))))

    def try_acquire(self) -> int | None:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self._connect()
            if not self._try_lock() and not (self._break_stale() and self._try_lock()):
                return None
            conn = self._live()
            row = conn.execute(
                "UPDATE controller_leases SET epoch = epoch + 1, holder = %s, acquired_at = now() "
                "WHERE name = 'controller' RETURNING epoch", (holder_id(),)).fetchone()
            if row is None:  # an unmigrated database: nothing to control yet
                conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(CONTROLLER_KEY),))
                return None
            conn.execute(f"LISTEN {WAKE_CHANNEL}")
            self.epoch = int(row[0])
            return self.epoch
        except Exception as e:  # noqa: BLE001 - the database may be down: try again later
            log.warning("controller election: %s", e)
            self._drop()
            return None

    def _break_stale(self) -> bool:
        """The lock's holder, if its session has been silent for longer than the lease:
        terminate that session (its lock goes with it). True if one was terminated.

        The holder is whoever holds the lock now (pg_locks), never a recorded pid that
        may since belong to another session. Its silence is pg_stat_activity.state_change:
        the controller's heartbeat (check) is a query, which moves it at least every second.
        Seeing it needs the same database role as the holder (or pg_read_all_stats), and
        terminating it the same role (or pg_signal_backend): every controller uses one URL."""
        key = advisory_key(CONTROLLER_KEY) & 0xFFFF_FFFF_FFFF_FFFF
        row = self._live().execute(
            "SELECT a.pid, a.client_addr::text, a.client_port, extract(epoch FROM now() - a.state_change) "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid",
            (key >> 32, key & 0xFFFF_FFFF)).fetchone()
        if row is None or row[3] is None or float(row[3]) <= self.lease_seconds:
            return False
        pid, addr, port, silent = row
        log.warning("controller election: the controller's session (backend pid %s, client %s:%s) has been "
                    "silent for %.1f s, longer than the lease (TRAINJOBS_CONTROLLER_LEASE_SECONDS=%g); "
                    "terminating it to take over", pid, addr, port, float(silent), self.lease_seconds)
        # Wait (bounded, within this session's statement_timeout) for the backend to exit:
        # its lock is released as it goes.
        return bool(_scalar(self._live().execute("SELECT pg_terminate_backend(%s, %s)",
                                                 (pid, max(100, self._statement_ms - 500)))))

    def check(self, wait: float, on_wake: Callable[[str], None]) -> bool:
        try:
            conn = self._live()
            for note in conn.notifies(timeout=wait):
                on_wake(note.payload)
            # The heartbeat the lease is judged by (_break_stale): a query, so the server
            # sees it (pg_stat_activity.state_change); unanswered, it fails after half the lease.
            conn.execute("SELECT 1")
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
        self.path = lock_file(url, ".controller.lock")
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
        from datetime import datetime

        from sqlalchemy import select, update

        from service.persistence.models import ControllerLease
        try:
            with self.engine.begin() as conn:
                conn.execute(update(ControllerLease).where(ControllerLease.name == "controller").values(
                    epoch=ControllerLease.epoch + 1, holder=holder_id(), acquired_at=datetime.now(UTC)))
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


def leadership_for(url: str, engine, lease_seconds: float = 10.0) -> Leadership:
    return SqliteLeadership(url, engine) if is_sqlite(url) else PostgresLeadership(url, lease_seconds=lease_seconds)
