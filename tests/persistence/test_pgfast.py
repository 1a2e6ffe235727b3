"""service/persistence/pgfast.py runs the submit path's statements on psycopg beneath SQLAlchemy: its
errors must be the ones Core raises, and a lost connection must leave the pool."""
import uuid

import psycopg
import pytest
from sqlalchemy import Integer, bindparam, column, exc, select, table, text

from service.persistence import pgfast
from service.persistence.session import make_engine
from tests.conftest import truncate_all

pytestmark = pytest.mark.postgres

_TEAM = text("INSERT INTO teams (id, name, created_at) VALUES (:id, :name, now())")
_NAMED = select(column("name")).select_from(table("teams")).where(column("id") == bindparam("id"))


def test_rows_and_errors_are_sqlalchemys(pg_database):
    truncate_all(pg_database)
    engine = make_engine(pg_database)
    team = uuid.uuid4()
    with engine.begin() as conn:
        pgfast.execute(conn, _TEAM, {"id": team, "name": "pgfast"})
        assert pgfast.first(conn, _NAMED, {"id": team}).name == "pgfast"
        assert pgfast.first(conn, _NAMED, {"id": uuid.uuid4()}) is None
    with engine.connect() as conn:
        with pytest.raises(exc.IntegrityError):    # what create_job catches for a racing Idempotency-Key
            pgfast.execute(conn, _TEAM, {"id": uuid.uuid4(), "name": "pgfast"})
        conn.rollback()
        assert conn.execute(_NAMED, {"id": team}).scalar() == "pgfast"   # the connection is still usable
    engine.dispose()


def test_a_lost_connection_is_invalidated(pg_database):
    engine = make_engine(pg_database, pool_size=1)
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    # The pool's one connection is the one that held `pid`: end it from another session.
    with psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with engine.connect() as conn:
        with pytest.raises(exc.DBAPIError) as caught:
            pgfast.first(conn, _NAMED, {"id": uuid.uuid4()})
        assert caught.value.connection_invalidated
    with engine.connect() as conn:                  # the pool hands out a new connection
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pid
    engine.dispose()


_NAMES_OF = text("INSERT INTO teams (id, name, created_at) VALUES (:id, :name || '%' || :name, now())")
_MANY = select(*[bindparam(f"p{i}", type_=Integer).label(f"c{i}") for i in range(60)])


def test_statements_go_with_postgresqls_own_placeholders(pg_database):
    # A raw cursor, so psycopg parses nothing per execute (it caches its parse only for
    # statements of 50 parameters or fewer; the job-row writer's has more): a repeated name
    # is one parameter, a % is plain text, and 60 parameters arrive in their order.
    truncate_all(pg_database)
    engine = make_engine(pg_database)
    team = uuid.uuid4()
    with engine.begin() as conn:
        pgfast.execute(conn, _NAMES_OF, {"id": team, "name": "a%s"})
        assert pgfast.first(conn, _NAMED, {"id": team}).name == "a%s%a%s"
        row = pgfast.first(conn, _MANY, {f"p{i}": i * 7 for i in range(60)})
        assert tuple(row) == tuple(i * 7 for i in range(60)) and row.c59 == 413
    with engine.connect() as conn:
        with pytest.raises(exc.ProgrammingError, match="query parameter missing: p3"):
            pgfast.first(conn, _MANY, {f"p{i}": i for i in range(60) if i != 3})
    engine.dispose()
