"""Statements that commit themselves, for a unit of work whose one write is one statement.

A submit to a team without limits or webhooks reads once (the pre-check) and writes once
(the job-row writer's single statement: job, labels, event, cost, NOTIFY). In a
transaction that is four round trips on PostgreSQL: BEGIN, the read, the write, COMMIT.
With psycopg in autocommit mode it is two: the read runs alone, and the write is atomic
on its own (one statement commits whole or not at all), so nothing is half-written and
a NOTIFY in it is delivered as it commits. SQLAlchemy's transaction stays as it was: its
COMMIT and ROLLBACK find psycopg idle and send nothing.

The mode lasts until `end()` (the work learnt it needs a transaction: a limits lock, an
outbox row written beside the job) or the block's end; the connection goes back to the
pool in psycopg's ordinary mode, or is invalidated if it cannot be put back. Only a
session that has not begun anything (no transaction, nothing pending) is switched: what a
caller did first (a sweep's trial row, a relaunch's read) commits with the job as before.
SQLite, or a session in use: the handle does nothing and every statement is transactional."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session


class Autocommit:
    def __init__(self, conn: Connection | None = None, raw: psycopg.Connection | None = None) -> None:
        self._conn = conn
        self._raw = raw

    @property
    def on(self) -> bool:
        return self._raw is not None

    def end(self) -> None:
        """Statements from here on are in a transaction (psycopg's BEGIN at the next one)."""
        raw, conn = self._raw, self._conn
        if raw is None or conn is None:
            return
        self._raw = None
        try:
            raw.autocommit = False
        except psycopg.Error as e:
            # Lost, or (a bug) inside a transaction: never back to the pool in autocommit mode.
            conn.invalidate(e)


@contextmanager
def autocommit(session: Session) -> Iterator[Autocommit]:
    """The block's statements commit one by one until `handle.end()` (see the module's note)."""
    handle = Autocommit()
    if (session.get_bind().dialect.name == "postgresql" and not session.in_transaction()
            and not (session.new or session.dirty or session.deleted)):
        conn = session.connection()
        raw = conn.connection.driver_connection
        if isinstance(raw, psycopg.Connection) and not raw.autocommit \
                and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            raw.autocommit = True
            handle = Autocommit(conn, raw)
    try:
        yield handle
    finally:
        handle.end()
