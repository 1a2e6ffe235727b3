"""The job-row writer: the one place a new job's rows are inserted — the job row, its label
rows, its first event and its cost row (what team budgets add up) — for a submit
(jobs.submitter) and a retry attempt (lifecycle.retries) alike, so a new per-job table is
added here once. On PostgreSQL it is one statement (one round trip), which may also
evaluate the caller's `PgAlso` (the controller's wake-up: lifecycle.wake.notify_expr).

The submit path is the service's hottest: there, building SQLAlchemy statements and
running the ORM's bulk machinery cost more than the database does. So the statements
are built once per dialect, from the tables themselves (a new column is picked up),
and JSON columns are bound as text the caller has already encoded (the compiled job
is assembled from JSON the compiler wrote): nothing is encoded twice."""
from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import JSON, String, Table, Text, bindparam, insert, text
from sqlalchemy import column as result_column
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from service.persistence import pgfast
from service.persistence.models import Job, JobCost, JobEvent, JobLabel

_JOBS: Table = Job.__table__              # type: ignore[assignment]  # a declarative class's Table
_COSTS: Table = JobCost.__table__         # type: ignore[assignment]
_LABELS: Table = JobLabel.__table__       # type: ignore[assignment]
_EVENTS: Table = JobEvent.__table__       # type: ignore[assignment]
_EVENT_COLUMNS = ("job_id", "from_state", "to_state", "reason", "actor", "at")
_COST_COLUMNS = tuple(c.name for c in _COSTS.columns)
JSON_COLUMNS = frozenset(c.name for c in _JOBS.columns if isinstance(c.type, JSON))
COLUMNS = tuple(c.name for c in _JOBS.columns)
# A NOT NULL column with a constant default (priority 0, preemptions 0) takes it when not given.
DEFAULTS = {c.name: getattr(c.default, "arg", None) for c in _JOBS.columns
            if not c.nullable and c.default is not None and getattr(c.default, "is_scalar", False)}

# job_row's walk over the columns, worked out once: (name, a JSON column, the default).
_PLAN = tuple((c, c in JSON_COLUMNS, DEFAULTS.get(c)) for c in COLUMNS)
_COLUMN_SET = frozenset(COLUMNS)
_NULL = json.dumps(None)
_PG = postgresql.dialect()


class PgAlso(NamedTuple):
    """An SQL expression PostgreSQL evaluates in the writer's statement, with its bound
    parameters (their names must not be columns'); SQLite has no use for it."""

    expression: str
    params: Mapping[str, Any]


class PgGuard(NamedTuple):
    """A boolean SQL expression the writer's statement checks first, with its bound parameters
    (names start with `guard_`): false, and the statement writes nothing and evaluates no
    `PgAlso` (jobs.submitter `_guessed`: what a submit read earlier, checked where it writes)."""

    expression: str
    params: Mapping[str, Any]


def encode(value: Any) -> str:
    """A JSON column's value as the text stored (what SQLAlchemy's JSON type would write)."""
    return json.dumps(value)


def job_row(values: Mapping[str, Any], *, encoded: Mapping[str, str] = {}) -> dict[str, Any]:
    """Every column of jobs from `values` (a column not given is NULL), JSON columns encoded;
    `encoded`: JSON columns the caller has as text already (the compiled job)."""
    unknown = values.keys() - _COLUMN_SET
    if unknown:
        raise ValueError(f"not columns of jobs: {sorted(unknown)}")
    row: dict[str, Any] = {}
    for column, is_json, default in _PLAN:
        if column in encoded:
            row[column] = encoded[column]
        elif is_json:
            value = values.get(column)
            row[column] = _NULL if value is None else encode(value)   # most are None: no encoder call
        else:
            row[column] = values.get(column, default)
    return row


def insert_job(session: Session, row: Mapping[str, Any], labels: Mapping[str, str], event: Mapping[str, Any],
               cost: Mapping[str, Any] | None, *, pg_also: PgAlso | None = None, guard: PgGuard | None = None) -> bool:
    """`row`: `job_row`'s, every column of jobs with JSON columns encoded (its `labels`
    column and `labels` agree); `event`: the first event's row (lifecycle Engine.creation_event);
    `cost`: the job_costs row (budgets.cost_row: JSON as text), None for none; `pg_also`: see PgAlso;
    `guard` (PostgreSQL only): see PgGuard. True when the rows were written (always, without a guard)."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        # Child rows referencing the job in sibling CTEs are fine: foreign keys are checked
        # at the end of the statement. pg_notify is delivered at commit, like the rows.
        params: dict[str, Any] = {**row, **{f"event_{k}": event[k] for k in _EVENT_COLUMNS}}
        if cost is not None:
            params.update({f"cost_{k}": cost[k] for k in _COST_COLUMNS})
        if pg_also is not None:
            params.update(pg_also.params)
        also = pg_also.expression if pg_also else None
        if guard is None:
            pgfast.execute(conn, _postgres_statement(cost is not None, also), params)
            return True
        params.update(guard.params)
        found = pgfast.first(conn, _guarded_statement(cost is not None, also, guard.expression), params)
        return bool(found is not None and found.ok)
    if guard is not None:
        raise ValueError("a guarded insert is PostgreSQL's (one statement)")
    # SQLite: no round trips to save; the same rows through statements built once.
    job, label, first_event, job_cost = _sqlite_statements()
    conn.execute(job, dict(row))
    if labels:
        conn.execute(label, [{"job_id": row["id"], "key": k, "value": v} for k, v in labels.items()])
    conn.execute(first_event, dict(event))
    if cost is not None:
        conn.execute(job_cost, dict(cost))
    return True


@lru_cache(maxsize=8)
def _postgres_statement(with_cost: bool, also: str | None):
    # Plain SQL (psycopg adapts UUIDs, aware datetimes and text itself); JSON as text, cast once.
    values = [f"CAST(:{c} AS json)" if c in JSON_COLUMNS else f":{c}" for c in COLUMNS]
    cost = (f", cost AS (INSERT INTO {_COSTS.name} ({', '.join(_COST_COLUMNS)}) "
            f"VALUES ({', '.join(_cost_value(c) for c in _COST_COLUMNS)}))") if with_cost else ""
    return text(
        f"WITH job AS (INSERT INTO {_JOBS.name} ({', '.join(COLUMNS)}) VALUES ({', '.join(values)})), "
        f"labels AS (INSERT INTO {_LABELS.name} (job_id, key, value) "
        f"SELECT :id, l.key, l.value FROM json_each_text(CAST(:labels AS json)) AS l), "
        f"event AS (INSERT INTO {_EVENTS.name} ({', '.join(_EVENT_COLUMNS)}) "
        f"VALUES ({', '.join(':event_' + c for c in _EVENT_COLUMNS)}))"
        f"{cost} SELECT {also or '1'}")


@lru_cache(maxsize=8)
def _guarded_statement(with_cost: bool, also: str | None, guard: str):
    # The guard once, in a CTE every insert reads: each inserts only where it holds (a child row
    # without its job would fail the foreign keys at the statement's end), and the NOTIFY is
    # evaluated only then (CASE evaluates the branch taken; pg_notify is volatile).
    # A SELECT's values are typed by their own expression, not by the column they go to (as a
    # VALUES list's are): each is cast to its column's type, strings to text (a cast to
    # varchar(n) would cut a long value where the insert refuses it).
    values = [_typed(_JOBS, c, c) for c in COLUMNS]
    cost = (f", cost AS (INSERT INTO {_COSTS.name} ({', '.join(_COST_COLUMNS)}) "
            f"SELECT {', '.join(_typed(_COSTS, c, 'cost_' + c) for c in _COST_COLUMNS)} FROM guard WHERE guard.ok)"
            ) if with_cost else ""
    return text(
        f"WITH guard AS (SELECT ({guard}) AS ok), "
        f"job AS (INSERT INTO {_JOBS.name} ({', '.join(COLUMNS)}) SELECT {', '.join(values)} FROM guard WHERE guard.ok), "
        f"labels AS (INSERT INTO {_LABELS.name} (job_id, key, value) "
        f"SELECT CAST(:id AS uuid), l.key, l.value FROM guard, json_each_text(CAST(:labels AS json)) AS l WHERE guard.ok), "
        f"event AS (INSERT INTO {_EVENTS.name} ({', '.join(_EVENT_COLUMNS)}) "
        f"SELECT {', '.join(_typed(_EVENTS, c, 'event_' + c) for c in _EVENT_COLUMNS)} FROM guard WHERE guard.ok)"
        f"{cost} SELECT guard.ok, CASE WHEN guard.ok THEN {also or '1'} END AS also FROM guard"
    ).columns(result_column("ok"), result_column("also"))


def _typed(table: Table, name: str, param: str) -> str:
    kind = table.c[name].type
    sql = "text" if isinstance(kind, String) else kind.compile(dialect=_PG)
    return f"CAST(:{param} AS {sql})"


def _cost_value(column: str) -> str:
    return f"CAST(:cost_{column} AS json)" if isinstance(_COSTS.c[column].type, JSON) else f":cost_{column}"


@lru_cache(maxsize=1)
def _sqlite_statements():
    job = insert(_JOBS).values({c.name: bindparam(c.name, type_=Text() if c.name in JSON_COLUMNS else c.type)
                                for c in _JOBS.columns})
    cost = insert(_COSTS).values({c.name: bindparam(c.name, type_=Text() if isinstance(c.type, JSON) else c.type)
                                  for c in _COSTS.columns})
    return job, insert(_LABELS), insert(_EVENTS), cost
