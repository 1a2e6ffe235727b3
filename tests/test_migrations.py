"""Alembic is the only way the schema is made: it must match the models and go both ways."""
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from service import migrate
from service.db import make_engine
from service.models import Base


def test_models_and_migrations_agree(db_url):
    engine = make_engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == []


def test_downgrade_to_base_and_upgrade_again(db_url):
    migrate.downgrade(db_url, "base")
    engine = make_engine(db_url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate.upgrade(db_url)
    assert {"jobs", "job_events", "job_labels", "templates", "template_versions"} <= set(
        inspect(engine).get_table_names())
    engine.dispose()


def test_a_migrated_sqlite_file_is_already_in_wal_mode(tmp_path):
    """So no process has to switch it later, which needs the file to itself."""
    import sqlite3

    path = tmp_path / "fresh.db"
    migrate.upgrade(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
