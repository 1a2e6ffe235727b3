"""Alembic environment. The URL comes from the caller (service.persistence.migrate) or TRAINJOBS_DATABASE_URL."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from service.persistence.models import Base
from service.slices import get_settings

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().database_url


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = create_engine(_url())
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(conn) -> None:
    # render_as_batch: SQLite cannot ALTER most things; batch mode copies the table.
    context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
