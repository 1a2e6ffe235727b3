"""Run Alembic migrations programmatically: `trainjobs db upgrade` and tests use this."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Under the database's migration lock: replicas that start together take turns,
    and the later ones find nothing left to do."""
    from service.lifecycle.leader import migration_lock

    with migration_lock(url):
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    from service.lifecycle.leader import migration_lock

    with migration_lock(url):
        command.downgrade(alembic_config(url), revision)
