"""Alembic is the only way the schema is made: it must match the models and go both ways."""
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from service.persistence import migrate
from service.persistence.models import Base
from service.persistence.session import make_engine


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


def test_files_are_numbered_in_the_order_of_the_revision_chain():
    """A newcomer reads migrations/versions top to bottom: file N's down_revision is file N-1's
    revision. (Revision ids are what deployed databases store in alembic_version, so the ids of
    the round-1/2 files stay as they were; only the file names were renumbered.)"""
    import ast
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parents[2] / "migrations" / "versions").glob("[0-9]*.py"))
    numbers = [int(f.name[:4]) for f in files]
    assert numbers == list(range(1, len(files) + 1)), [f.name for f in files]

    def assigned(path: Path, name: str):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
                return ast.literal_eval(node.value)
        raise AssertionError(f"{path.name} assigns no {name}")

    previous = None
    for f in files:
        assert assigned(f, "down_revision") == previous, f.name
        previous = assigned(f, "revision")
