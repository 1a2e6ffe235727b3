"""Engine and sessions: one unit of work per request."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, *, pool_size: int = 10, pool_timeout: float = 30.0) -> Engine:
    """`pool_size` connections and no overflow: the app sizes it above its request limit
    (service/web/overload.py), so a request never waits for one; a wait is bounded by
    `pool_timeout` (then sqlalchemy.exc.TimeoutError, answered 503)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               pool_size=pool_size, max_overflow=0, pool_timeout=pool_timeout)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn, _record):
            # WAL lets the reconciler write while requests read; foreign keys are off by default.
            cur = conn.cursor()
            cur.execute("PRAGMA busy_timeout=30000")
            # Set once per database file (it persists). Asked for on every new connection, it
            # made a connection opened while the service was writing fail with "database is
            # locked" (seen in test set-ups): a connection that has not read the file yet
            # takes it for a change of mode. Reading the mode first needs no write lock.
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
        return engine
    # No pre-ping: it costs a round trip on every checkout. A connection that died
    # with the server fails its request with a 503 and invalidates the pool, and the
    # next requests reconnect (tests/faults cut the connection to check this).
    return create_engine(url, pool_size=pool_size, max_overflow=0, pool_timeout=pool_timeout)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def unit_of_work(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    """One request's session: committed if the work ends well, rolled back if it raises, closed."""
    session = session_factory()
    try:
        yield session
        if session.in_transaction():  # a commit of nothing still costs a transaction
            if session.connection().invalidated:
                # The connection died under the request (the database went away) and the
                # request answered for it (the UI's 503 page): nothing of it was stored, and a
                # commit would only raise again, turning that answer into a 500.
                session.rollback()
            else:
                session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()

