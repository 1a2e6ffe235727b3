"""The submit path's statements on psycopg directly, inside SQLAlchemy's transaction.

A statement through SQLAlchemy Core costs about 110 µs of CPU here against 75 µs on the
psycopg connection beneath it (bench: the template head query, 3,000 runs); the submit
path runs two, on every POST /v1/jobs. Only statements that are module constants come
here: each is compiled once for the connection's dialect. The transaction, the pool and
the errors stay SQLAlchemy's: a psycopg error is raised as the sqlalchemy.exc class Core
would raise (IntegrityError for a duplicate key, ...), and a connection lost in the
middle is invalidated, as Core does, so the pool does not hand it out again.
SQLite goes through Core unchanged (no round trips to save). Statements are compiled with
PostgreSQL's own $1, $2 placeholders and sent through a raw cursor: psycopg's cursor would
parse its %(name)s placeholders again on every execute of a statement over 50 parameters."""
from __future__ import annotations

import copy
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import psycopg
from sqlalchemy import Delete, Insert, Select, TextClause, Update, exc
from sqlalchemy.engine import Connection, Dialect

# What comes here: a module constant built with select(), insert(), update(), delete() or text().
Statement = Select[Any] | Insert | Update | Delete | TextClause


class _Compiled(NamedTuple):
    statement: Statement
    sql: str                     # with $1, $2, ... (PostgreSQL's own placeholders)
    order: tuple[str, ...]       # the parameters' names, in the placeholders' order
    # Makes a row: a namedtuple of its columns, made once (psycopg's namedtuple_row makes one a
    # cursor). None: the statement names no columns (text(), DML without RETURNING).
    make_row: Callable[[Iterable[Any]], tuple[Any, ...]] | None


_COMPILED: dict[int, _Compiled] = {}


def _row_maker(fields: list[str]) -> Callable[[Iterable[Any]], tuple[Any, ...]]:
    # The fields are known at run time only: mypy wants them literal to make a static type,
    # and there is none to make, so the class is typed Any.
    row: Any = namedtuple("Row", fields, rename=True)  # type: ignore[misc]
    return row._make


def _numbered(dialect: Dialect) -> Dialect:
    """The connection's dialect (its server's settings) writing $1, $2, ... for parameters."""
    numbered = copy.copy(dialect)
    numbered.paramstyle, numbered.positional = "numeric_dollar", True
    numbered.identifier_preparer = numbered.preparer(numbered)   # it escapes % for pyformat only
    return numbered


def _compiled(conn: Connection, statement: Statement) -> _Compiled:
    found = _COMPILED.get(id(statement))
    if found is None or found.statement is not statement:
        columns = getattr(statement, "selected_columns", None)
        make_row = _row_maker([c.key for c in columns]) if columns is not None else None
        compiled = statement.compile(dialect=_numbered(conn.dialect))
        found = _Compiled(statement, str(compiled), tuple(compiled.positiontup or ()), make_row)
        _COMPILED[id(statement)] = found
    return found


def first(conn: Connection, statement: Statement, params: Mapping[str, Any]) -> Any:
    """The first row (attribute access by column name), or None. `statement`: a select()."""
    if conn.dialect.name != "postgresql":
        return conn.execute(statement, params).first()
    return _run(conn, statement, params, fetch=True)


def execute(conn: Connection, statement: Statement, params: Mapping[str, Any]) -> None:
    """Run it; its rows, if any, are dropped."""
    if conn.dialect.name != "postgresql":
        conn.execute(statement, params).close()
        return
    _run(conn, statement, params, fetch=False)


def _run(conn: Connection, statement: Statement, params: Mapping[str, Any], *, fetch: bool) -> Any:
    compiled = _compiled(conn, statement)
    sql = compiled.sql
    make_row = compiled.make_row
    if fetch and make_row is None:
        raise TypeError("pgfast.first needs a statement that names its columns (a select())")
    if not conn.in_transaction():
        conn.begin()  # what Core's execute does (autobegin): its commit or rollback then ends ours
    raw = conn.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise TypeError(f"pgfast runs on psycopg connections, not {type(raw).__name__} (the database URL's driver)")
    try:
        # A raw cursor: the query is sent as it is. psycopg's own cursor parses %(name)s
        # placeholders on every execute of a statement with over 50 parameters (it caches
        # only smaller ones): the job-row writer's has 54, and the parse cost ~15 % of a submit.
        with psycopg.RawCursor(raw) as cur:
            cur.execute(sql, _values(compiled.order, params))
            if not fetch or make_row is None:
                return None
            found = cur.fetchone()
            return None if found is None else make_row(found)
    except psycopg.Error as e:
        lost = raw.closed or isinstance(e, psycopg.OperationalError) and raw.broken
        if lost:
            conn.invalidate(e)
        raise exc.DBAPIError.instance(sql, params, e, psycopg.Error, connection_invalidated=lost) from e


def _values(order: tuple[str, ...], params: Mapping[str, Any]) -> list[Any]:
    try:
        return [params[name] for name in order]
    except KeyError as e:   # as psycopg's cursor says it
        raise psycopg.ProgrammingError(f"query parameter missing: {e.args[0]}") from None
