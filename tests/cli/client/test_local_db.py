"""The local admin commands (`tokens`, `db`) say which database they use and
refuse one that does not exist instead of creating an empty one."""
from __future__ import annotations

import subprocess
import sys
import uuid

from tests.cli.conftest import cli_env
from tests.conftest import PG_ADMIN


def admin(tmp_path, *args, url=None):
    env = cli_env(tmp_path)
    env["TRAINJOBS_DATABASE_URL"] = url or f"sqlite:///{tmp_path / 'svc.db'}"
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)


def test_missing_sqlite_file_is_refused_not_created(tmp_path):
    db = tmp_path / "svc.db"
    for args in (["tokens", "list"], ["tokens", "create", "--team", "t", "--role", "admin", "--name", "x"],
                 ["db", "upgrade"], ["db", "downgrade", "base"]):
        r = admin(tmp_path, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert f"refusing to use SQLite file {db}: the file does not exist" in r.stderr
        assert "trainjobs prepare" in r.stderr
        assert not db.exists()
    created = admin(tmp_path, "db", "upgrade", "--create")
    assert created.returncode == 0 and db.is_file(), created.stderr
    made = admin(tmp_path, "tokens", "create", "--team", "t", "--role", "admin", "--name", "x")
    assert made.returncode == 0 and made.stdout.startswith("tj_")
    assert f"using the database SQLite file {db}" in made.stderr


def test_missing_postgres_database_is_refused(tmp_path):
    name = f"trainjobs_absent_{uuid.uuid4().hex[:8]}"
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    r = admin(tmp_path, "tokens", "list", url=url)
    assert r.returncode == 2 and f"refusing to use {url}" in r.stderr and "cannot connect" in r.stderr


def test_the_database_line_names_the_variable_only_when_it_is_set(tmp_path):
    """Issue 37: `tokens create` said "(TRAINJOBS_DATABASE_URL)" of the default database."""
    env = cli_env(tmp_path)
    env.pop("TRAINJOBS_DATABASE_URL", None)
    unset = subprocess.run([sys.executable, "-m", "service.cli", "tokens", "list"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=180)
    line = next(ln for ln in unset.stderr.splitlines() if "using the database" in ln)
    assert line.endswith("(the default; TRAINJOBS_DATABASE_URL sets another)"), line
    named = admin(tmp_path, "tokens", "list")
    assert "(TRAINJOBS_DATABASE_URL)" in named.stderr
