"""Run Alembic migrations programmatically: `trainjobs db upgrade` and tests use this."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Under the database's migration lock: replicas that start together take turns,
    and the later ones find nothing left to do."""
    from service.persistence.locks import migration_lock

    with migration_lock(url):
        command.upgrade(alembic_config(url), revision)
        _sqlite_wal(url)


def _sqlite_wal(url: str) -> None:
    """Leave a SQLite file in WAL mode (kept in the file) while no one else uses it. Alembic's
    engine leaves it in rollback-journal mode, and switching to WAL later needs the file to
    itself: a process whose first connection came while another already wrote failed with
    "database is locked" (seen in the tests, and possible when `serve --workers N` starts)."""
    if not url.startswith("sqlite"):
        return
    from service.persistence.session import make_engine

    engine = make_engine(url)   # its connect hook sets journal_mode=WAL
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def downgrade(url: str, revision: str) -> None:
    from service.persistence.locks import migration_lock

    with migration_lock(url):
        command.downgrade(alembic_config(url), revision)
