"""The local admin commands (`tokens`, `db`) work on the service's database
directly. They say which one, and refuse one that does not exist: run in the
wrong folder, a SQLite URL would otherwise create an empty database there and
hand out tokens nobody's service reads."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


def describe(url: str) -> str:
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        return f"SQLite file {Path(u.database).resolve()}" if u.database and u.database != ":memory:" \
            else "an in-memory SQLite database"
    return u.render_as_string(hide_password=True)


def missing(url: str) -> str | None:
    """Why the database cannot be used as an existing one, or None if it can."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if not u.database or u.database == ":memory:":
            return "an in-memory database holds nothing the service could use"
        if not Path(u.database).is_file():
            return "the file does not exist"
        return None
    engine = create_engine(url, pool_pre_ping=False)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as e:  # noqa: BLE001 - any failure to connect is reported as is
        return f"cannot connect: {str(getattr(e, 'orig', None) or e).strip().splitlines()[0]}"
    finally:
        engine.dispose()
    return None


def check(url: str, *, create_ok: bool = False) -> bool:
    """Print which database is used; False (after saying why) if it must not be."""
    # Name the variable only when it chose the database: unset, the URL is the default's.
    chosen_by = "TRAINJOBS_DATABASE_URL" if os.environ.get("TRAINJOBS_DATABASE_URL") else \
        "the default; TRAINJOBS_DATABASE_URL sets another"
    print(f"trainjobs: using the database {describe(url)} ({chosen_by})", file=sys.stderr)
    if create_ok:
        return True
    why = missing(url)
    if why is None:
        return True
    print(f"trainjobs: refusing to use {describe(url)}: {why}. Set TRAINJOBS_DATABASE_URL to the service's "
          "database, or run `trainjobs prepare` (or `serve`) to create a new one.", file=sys.stderr)
    return False
