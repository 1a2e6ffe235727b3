"""How many rows a statement changed.

`Session.execute` is typed to return a plain `Result` whatever the statement; an UPDATE,
INSERT or DELETE run through it gives a `CursorResult`, the one that carries `rowcount`.
Compare-and-set writers (lifecycle.engine, sweeps, webhooks, budgets) read it to learn
whether their guarded write won."""
from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import CursorResult, Result

from service.persistence.models import Base


def rows_changed(result: Result[Any]) -> int:
    if not isinstance(result, CursorResult):
        raise TypeError(f"rows_changed needs the result of an UPDATE, INSERT or DELETE, not {type(result).__name__}")
    return result.rowcount


def table_of(model: type[Base]) -> Table:
    """A mapped class's Table, for Core statements that skip the ORM's per-row cost.
    (Declarative types `__table__` as any FromClause; every model here maps one Table.)"""
    table = model.__table__
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not mapped to a single table")
    return table
