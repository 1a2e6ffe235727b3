"""Writing a new job: the job row, its label rows, its first event, its cost row (what
team budgets add up) and the controller's wake-up — in one round trip on PostgreSQL.

The submit path is the service's hottest: there, building SQLAlchemy statements and
running the ORM's bulk machinery cost more than the database does. So the statements
are built once per dialect, from the tables themselves (a new column is picked up),
and JSON columns are bound as text the caller has already encoded (the compiled job
is assembled from JSON the compiler wrote): nothing is encoded twice."""
from __future__ import annotations

import json
from functools import lru_cache

from sqlalchemy import JSON, Text, bindparam, insert, text
from sqlalchemy.orm import Session

from service.lifecycle.leader import WAKE_CHANNEL
from service.persistence import pgfast
from service.persistence.models import Job, JobCost, JobEvent, JobLabel

_JOBS = Job.__table__
_EVENT_COLUMNS = ("job_id", "from_state", "to_state", "reason", "actor", "at")
_COST_COLUMNS = tuple(c.name for c in JobCost.__table__.columns)
JSON_COLUMNS = frozenset(c.name for c in _JOBS.columns if isinstance(c.type, JSON))


def encode(value) -> str:
    """A JSON column's value as the text stored (what SQLAlchemy's JSON type would write)."""
    return json.dumps(value)


def insert_job(session: Session, row: dict, labels: dict[str, str], event: dict, cost: dict, *,
               wake: str | None) -> None:
    """`row`: every column of jobs, JSON columns already encoded (see `encode`); `event`:
    the first event's row (lifecycle Engine.creation_event); `cost`: the job_costs row
    (budgets.cost_row); `wake`: the NOTIFY payload that wakes the controller when this commits
    (Controller.wake: a backend's name, with ":admit" for a new job); None: no NOTIFY (the
    submitting process controls the database and wakes its own loop)."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        # Child rows referencing the job in sibling CTEs are fine: foreign keys are checked
        # at the end of the statement. pg_notify is delivered at commit, like the rows.
        pgfast.execute(conn, _postgres_statement(wake is not None), {**row, **{f"event_{k}": event[k] for k in _EVENT_COLUMNS},
                                                     **{f"cost_{k}": cost[k] for k in _COST_COLUMNS},
                                                     "wake_channel": WAKE_CHANNEL, "wake_backend": wake})
        return
    # SQLite: no round trips to save; the same rows through statements built once.
    conn.execute(_sqlite_statements()[0], row)
    if labels:
        conn.execute(_sqlite_statements()[1], [{"job_id": row["id"], "key": k, "value": v}
                                               for k, v in labels.items()])
    conn.execute(_sqlite_statements()[2], event)
    conn.execute(_sqlite_statements()[3], cost)


@lru_cache(maxsize=2)
def _postgres_statement(notify: bool):
    # Plain SQL (psycopg adapts UUIDs, aware datetimes and text itself); JSON as text, cast once.
    cols = [c.name for c in _JOBS.columns]
    values = [f"CAST(:{c} AS json)" if c in JSON_COLUMNS else f":{c}" for c in cols]
    return text(
        f"WITH job AS (INSERT INTO {_JOBS.name} ({', '.join(cols)}) VALUES ({', '.join(values)})), "
        f"labels AS (INSERT INTO {JobLabel.__tablename__} (job_id, key, value) "
        f"SELECT :id, l.key, l.value FROM json_each_text(CAST(:labels AS json)) AS l), "
        f"event AS (INSERT INTO {JobEvent.__tablename__} ({', '.join(_EVENT_COLUMNS)}) "
        f"VALUES ({', '.join(':event_' + c for c in _EVENT_COLUMNS)})), "
        f"cost AS (INSERT INTO {JobCost.__tablename__} ({', '.join(_COST_COLUMNS)}) "
        f"VALUES ({', '.join(_cost_value(c) for c in _COST_COLUMNS)})) "
        + ("SELECT pg_notify(:wake_channel, :wake_backend)" if notify else "SELECT 1"))


def _cost_value(column: str) -> str:
    return f"CAST(:cost_{column} AS json)" if isinstance(JobCost.__table__.c[column].type, JSON) else f":cost_{column}"


@lru_cache(maxsize=1)
def _sqlite_statements():
    job = insert(_JOBS).values({c.name: bindparam(c.name, type_=Text() if c.name in JSON_COLUMNS else c.type)
                                for c in _JOBS.columns})
    cost = insert(JobCost.__table__).values({c.name: bindparam(c.name, type_=Text() if isinstance(c.type, JSON)
                                                               else c.type) for c in JobCost.__table__.columns})
    return job, insert(JobLabel.__table__), insert(JobEvent.__table__), cost
