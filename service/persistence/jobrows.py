"""The job-row writer: the one place a new job's rows are inserted — the job row and the
rows of every per-job table (`PER_JOB`: its labels, its first event, its cost row, which
team budgets add up) — for a submit (jobs.submitter) and a retry attempt
(lifecycle.retries) alike. A new per-job table is one line in `PER_JOB`.

One plan, one builder: the tables, their columns and how each is sent are worked out once
from `PER_JOB` and the tables themselves (a new column is picked up). On PostgreSQL the plan
is one statement (one round trip) that inserts every table under a guard (`Guard`: what a
guessed submit read earlier, checked where it writes; `ALWAYS` otherwise) and may also
evaluate the caller's `PgAlso` (the controller's wake-up: lifecycle.wake.notify_expr). On
SQLite the same plan is an insert per table, after the guard is read.

The submit path is the service's hottest: building SQLAlchemy statements and running the
ORM's bulk machinery cost more than the database does. So a statement is built once per
shape, and JSON columns are bound as text the caller has already encoded (the compiled job
is assembled from JSON the compiler wrote): nothing is encoded twice."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    JSON,
    ColumnElement,
    Insert,
    Select,
    String,
    Table,
    Text,
    bindparam,
    case,
    cast,
    column,
    func,
    insert,
    literal_column,
    select,
    text,
    true,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.selectable import CTE

from service.persistence import pgfast
from service.persistence.models import Job, JobBackend, JobCost, JobEvent, JobLabel
from service.persistence.rows import table_of

_JOBS = table_of(Job)
JSON_COLUMNS = frozenset(c.name for c in _JOBS.columns if isinstance(c.type, JSON))
COLUMNS = tuple(c.name for c in _JOBS.columns)
_NULL = json.dumps(None)
_EMPTY = "[]"


class NewJob(NamedTuple):
    """A new job as the writer takes it: `row` (`job_row`'s), its `labels` (what the row's labels
    column holds), its first `event` (lifecycle Engine.creation_event) and its `cost` row
    (budgets.cost_row; None: none). A per-job table's rows are made from it (`PER_JOB`)."""

    row: Mapping[str, Any]
    labels: Mapping[str, str]
    event: Mapping[str, Any]
    cost: Mapping[str, Any] | None


class PerJob(NamedTuple):
    """A table written with every new job, in the writer's one statement. `rows`: its rows,
    made from the NewJob (each a mapping of its columns, JSON columns as text: `encode`; a
    column not given takes its constant default or NULL; an autoincrement key is the
    database's). `many`: any number of rows (sent as one JSON array); else none or one (sent
    as parameters, the cheaper: psycopg adapts scalars in a fraction of an array's time)."""

    table: Table
    rows: Callable[[NewJob], Sequence[Mapping[str, Any]]]
    many: bool = False


# The per-job tables (docs/DESIGN.md, "Where things go": add one here, with its migration and
# model; its foreign key to jobs.id ON DELETE CASCADE, so its rows go with their job).
PER_JOB: tuple[PerJob, ...] = (
    PerJob(table_of(JobLabel), lambda job: [{"job_id": job.row["id"], "key": k, "value": v}
                                            for k, v in job.labels.items()], many=True),
    PerJob(table_of(JobEvent), lambda job: (job.event,)),
    PerJob(table_of(JobCost), lambda job: () if job.cost is None else (job.cost,)),
    PerJob(table_of(JobBackend), lambda job: _accepted(job), many=True),
)


def _accepted(job: NewJob) -> list[dict[str, Any]]:
    """A job_backends row for each backend a job accepts, when it accepts more than one (Job.accepts)."""
    text_ = job.row.get("accepts")
    if text_ is None or text_ == _NULL:
        return []
    return [{"job_id": job.row["id"], "backend": a["backend"], "rank": i, "demand": encode(a.get("demand"))}
            for i, a in enumerate(json.loads(text_))]


class PgAlso(NamedTuple):
    """An SQL expression PostgreSQL evaluates in the writer's statement, with its bound
    parameters (their names must not be the statement's own); SQLite has no use for it."""

    expression: str
    params: Mapping[str, Any]


class Guard(NamedTuple):
    """A condition the writer checks where it writes, with its bound parameters (names not the
    statement's own: `_check_names`): false, and nothing is written and no `PgAlso` evaluated
    (jobs.precheck.guard: what a guessed submit read earlier)."""

    expression: ColumnElement[bool]
    params: Mapping[str, Any]


ALWAYS = Guard(true(), {})     # the submit in order, a retry attempt: its checks ran before


def encode(value: Any) -> str:
    """A JSON column's value as the text stored (what SQLAlchemy's JSON type would write)."""
    return json.dumps(value)


def _written(table: Table) -> tuple[tuple[str, Any], ...]:
    """(column, its constant default or None: priority 0, preemptions 0) for each column the
    writer sends, in the table's order: all but an autoincrement key (JobEvent.id), which the
    database numbers. A column not given takes its default."""
    found = _WRITTEN.get(table)
    if found is None:
        found = tuple((c.name, getattr(c.default, "arg", None) if getattr(c.default, "is_scalar", False) else None)
                      for c in table.columns if not (c.primary_key and c.autoincrement is True))
        _WRITTEN[table] = found
    return found


_WRITTEN: dict[Table, tuple[tuple[str, Any], ...]] = {}
_NAMES: dict[Table, frozenset[str]] = {}
_PARAMS: dict[Table, tuple[tuple[str, str, Any], ...]] = {}
# job_row's walk over the columns, worked out once: (name, a JSON column, the default).
_PLAN = tuple((c, c in JSON_COLUMNS, default) for c, default in _written(_JOBS))
_COLUMN_SET = frozenset(COLUMNS)


def job_row(values: Mapping[str, Any], *, encoded: Mapping[str, str] = {}) -> dict[str, Any]:
    """Every column of jobs from `values` (a column not given is NULL), JSON columns encoded;
    `encoded`: JSON columns the caller has as text already (the compiled job)."""
    unknown = values.keys() - _COLUMN_SET
    if unknown:
        raise ValueError(f"not columns of jobs: {sorted(unknown)}")
    row: dict[str, Any] = {}
    for column_, is_json, default in _PLAN:
        if column_ in encoded:
            row[column_] = encoded[column_]
        elif is_json:
            value = values.get(column_)
            row[column_] = _NULL if value is None else encode(value)   # most are None: no encoder call
        else:
            row[column_] = values.get(column_, default)
    return row


def insert_job(session: Session, row: Mapping[str, Any], labels: Mapping[str, str], event: Mapping[str, Any],
               cost: Mapping[str, Any] | None, *, pg_also: PgAlso | None = None, guard: Guard = ALWAYS) -> bool:
    """`row`: `job_row`'s, every column of jobs with JSON columns encoded (its `labels` column
    and `labels` agree); `event`, `cost`: see NewJob; `pg_also`: see PgAlso; `guard`: see Guard.
    True when the rows were written (always, under ALWAYS)."""
    job = NewJob(row, labels, event, cost)
    per_job = PER_JOB
    rows = [p.rows(job) for p in per_job]
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        # SQLite: no round trips to save; the guard read, then the plan's inserts.
        if guard is not ALWAYS and not conn.execute(select(guard.expression), dict(guard.params)).scalar():
            return False
        conn.execute(_sqlite_insert(_JOBS), dict(row))
        for p, given in zip(per_job, rows, strict=True):
            if given:
                conn.execute(_sqlite_insert(p.table), [_complete(p.table, r) for r in given])
        return True
    # Child rows referencing the job in sibling CTEs are fine: foreign keys are checked at the
    # end of the statement. pg_notify is delivered at commit, like the rows.
    params: dict[str, Any] = dict(row)
    shape = []      # which per-job tables are written
    for p, given in zip(per_job, rows, strict=True):
        if p.many:
            params[f"{p.table.name}__rows"] = json.dumps([_complete(p.table, r) for r in given], default=str) if given else _EMPTY
        elif given:
            _one_row_params(p.table, given, params)
        shape.append(p.many or bool(given))
    if pg_also is not None:
        params.update(pg_also.params)
    params.update(guard.params)
    statement = _postgres_statement(per_job, tuple(shape), pg_also.expression if pg_also else None,
                                    guard.expression)
    found = pgfast.first(conn, statement, params)
    return bool(found is not None and found.ok)


# --- the plan's rows: each table's columns and defaults (`_written`), on both databases ------------

def _complete(table: Table, given: Mapping[str, Any]) -> dict[str, Any]:
    _known(table, given)
    return {name: given.get(name, default) for name, default in _written(table)}


def _one_row_params(table: Table, given: Sequence[Mapping[str, Any]], params: dict[str, Any]) -> None:
    """The row's values into `params`, each named `<table>__<column>` (no column of jobs has `__`,
    so no name is also the job row's)."""
    if len(given) != 1:
        raise ValueError(f"{table.name} takes one row per job, not {len(given)} (PerJob many=True takes any number)")
    one = _known(table, given[0])
    named = _PARAMS.get(table)
    if named is None:
        named = _PARAMS[table] = tuple((name, f"{table.name}__{name}", default) for name, default in _written(table))
    for name, param, default in named:
        params[param] = one.get(name, default)


def _known(table: Table, given: Mapping[str, Any]) -> Mapping[str, Any]:
    """`given`, if it names only columns of `table` (a misspelt one would be dropped unseen)."""
    names = _NAMES.get(table)
    if names is None:
        names = _NAMES[table] = frozenset(table.c.keys())
    if not given.keys() <= names:
        raise ValueError(f"not columns of {table.name}: {sorted(given.keys() - names)}")
    return given


# --- PostgreSQL: one statement per shape ----------------------------------------------------------

_STATEMENTS: dict[tuple, tuple[tuple[PerJob, ...], ColumnElement[bool], Select]] = {}
_MAX_STATEMENTS = 64      # shapes: tables with a row x a PgAlso or none x a guard; a few in use


def _postgres_statement(per_job: tuple[PerJob, ...], shape: tuple[bool, ...], also: str | None,
                        guard: ColumnElement[bool]) -> Select:
    """`shape`: which per-job tables are written. Cached by the identity of `per_job` and
    `guard` (module constants; a clause's == builds SQL, it compares nothing)."""
    key = (id(per_job), shape, also, id(guard))
    found = _STATEMENTS.get(key)
    if found is not None and found[0] is per_job and found[1] is guard:
        return found[2]
    checked = select(guard.label("ok")).cte("guard")
    written = [p for p, here in zip(per_job, shape, strict=True) if here]
    writes = [_insert_one(_JOBS, "", checked)] + [
        _insert_many(p.table, checked) if p.many else _insert_one(p.table, f"{p.table.name}__", checked) for p in written]
    # pg_notify is volatile and CASE evaluates the branch taken: no NOTIFY unless the rows are written.
    statement = select(checked.c.ok, case((checked.c.ok, text(also) if also else literal_column("1"))).label("also")) \
        .add_cte(*writes)
    _check_names(written, guard, also)
    if len(_STATEMENTS) >= _MAX_STATEMENTS:
        _STATEMENTS.clear()
    _STATEMENTS[key] = (per_job, guard, statement)
    return statement


def _sent_type(table: Table, name: str) -> Any:
    # A SELECT's values are typed by their own expression, not by the column they go to (as a
    # VALUES list's are): each is cast to its column's type, strings to text (a cast to
    # varchar(n) would cut a long value where the insert refuses it), JSON from its text.
    kind = table.c[name].type
    return Text() if isinstance(kind, String) else kind


def _insert_one(table: Table, prefix: str, checked: CTE) -> CTE:
    names = [name for name, _ in _written(table)]
    values = select(*(cast(bindparam(prefix + n), _sent_type(table, n)) for n in names)).where(checked.c.ok)
    return _insert(table, names, values)


def _insert_many(table: Table, checked: CTE) -> CTE:
    # The rows as one JSON array, `<table>__rows` (json.dumps: a uuid or a time as its text),
    # typed per column; JSON columns come as text (encoded), as everywhere in the writer.
    names = [name for name, _ in _written(table)]
    rows = func.json_to_recordset(cast(bindparam(f"{table.name}__rows"), JSON)).table_valued(
        *(column(n, Text() if isinstance(table.c[n].type, JSON) else _sent_type(table, n)) for n in names)
    ).render_derived(name="r", with_types=True)
    values = select(*(cast(rows.c[n], _sent_type(table, n)) for n in names)).select_from(checked, rows) \
        .where(checked.c.ok)
    return _insert(table, names, values)


def _insert(table: Table, names: list[str], values: Select) -> CTE:
    statement: Insert = insert(table).from_select(names, values, include_defaults=False)
    return statement.cte(f"write_{table.name}")


def _check_names(written: list[PerJob], guard: ColumnElement[bool], also: str | None) -> None:
    """The guard's and the PgAlso's parameters are sent beside the rows': a name both use would
    send one value for two meanings."""
    own = set(COLUMNS) | {f"{p.table.name}__{'rows' if p.many else n}" for p in written for n, _ in _written(p.table)}
    theirs = _binds(guard) | (set(text(also)._bindparams) if also else set())
    clash = own & theirs
    if clash:
        raise ValueError(f"the guard's or PgAlso's parameters {sorted(clash)} are also the rows' own: rename them")


def _binds(clause: Any) -> set[str]:
    return {b.key for b in visitors.iterate(clause) if isinstance(b, BindParameter)}


# --- SQLite: the same plan, an insert per table -----------------------------------------------------

_SQLITE: dict[Table, Insert] = {}


def _sqlite_insert(table: Table) -> Insert:
    found = _SQLITE.get(table)
    if found is None:
        # JSON columns bound as text: the caller encoded them (nothing is encoded twice).
        found = insert(table).values({n: bindparam(n, type_=Text() if isinstance(table.c[n].type, JSON) else table.c[n].type)
                                      for n, _ in _written(table)})
        _SQLITE[table] = found
    return found
