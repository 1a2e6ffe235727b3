"""Shared fixtures: real SQLite and real PostgreSQL databases, migrated by Alembic.

PostgreSQL runs on 127.0.0.1:5432 (user postgres, trust auth). Where it is not
reachable the postgres tests skip, except under CI=true, where they fail."""
from __future__ import annotations

import functools
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import text

from service.backends.local import sandbox as _sandbox
from service.persistence import migrate
from service.persistence.models import Base
from service.persistence.session import make_engine, make_session_factory

# Replicas of local jobs read gates and write marks in the tests' folders (tmp_path below,
# under /tmp/trainjobs-tests). As root each job runs in a sandbox whose /tmp is private and
# whose host is read-only (docs/local.md): this makes those folders visible in every job's
# sandbox, for every Settings a test builds (an explicit value still wins).
os.environ.setdefault("TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS",
                      '["' + str(Path(tempfile.gettempdir()) / "trainjobs-tests") + '"]')

# httpx waits 5 s by default for a connection or a read. On a loaded 2-core CI host a test
# server's answer has taken longer than that (stop 44: the landing page; stop 45: a 422 of
# GET /v1/sweeps, both fine seconds later), failing tests that wait on a real answer. Every
# request a test makes without its own timeout now waits up to HTTPX_TEST_TIMEOUT; a test that
# means a short wait passes its own. The service's own httpx use always names its timeout
# (service/webhooks/sender.py, the clients' _base.py), so this changes no behaviour under test.
HTTPX_TEST_TIMEOUT = 60.0
for _field in ("connect", "read", "write", "pool"):
    setattr(httpx._config.DEFAULT_TIMEOUT_CONFIG, _field, HTTPX_TEST_TIMEOUT)

# Every app a test starts with the local backend as root first probes in a subprocess whether this
# machine can make a job's namespaces (service/backends/local/sandbox.py probe): 25 ms on a quiet
# host, 200 ms under load, nearly all of an app's start, and the suite starts an app in most of
# its 2,600 tests. The machine does not change during a test process, so once a probe of this
# process succeeded it is not made again; a failed one (a timeout on a loaded host) is made again
# at the next start, as before. A test of the refusal runs `serve` without CAP_SYS_ADMIN in a
# process of its own (tests/backends/local/test_sandbox_start.py), which probes for itself.
_probed_ok: list[bool] = []


@functools.wraps(_sandbox.probe)
def _probe_once(probe=_sandbox.probe) -> str | None:
    if _probed_ok:
        return None
    why = probe()
    if why is None:
        _probed_ok.append(True)
    return why


_sandbox.probe = _probe_once

# The API fixtures (settings, tokens, client, api_client, demo, live_server) for every
# folder: the tests of one route live with its domain (tests/jobs, tests/templates, ...),
# not under one tests/api folder whose conftest only its own files could see.
pytest_plugins = ["tests.apikit"]

PG_ADMIN = os.environ.get("TRAINJOBS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def pytest_configure(config) -> None:
    """Under pytest-xdist (scripts/test.sh: -n auto) each worker is a process of its own
    that starts local replicas: give each its own range of replica uids, so two workers'
    concurrent jobs never share one (uids are picked per process from the base). Worker
    gwN gets base + N * count; `serve` processes the tests start inherit it (tests/servekit.py)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        base = int(os.environ.get("TRAINJOBS_LOCAL_REPLICA_UID_BASE", "200000"))
        count = int(os.environ.get("TRAINJOBS_LOCAL_REPLICA_UID_COUNT", "1000"))
        os.environ["TRAINJOBS_LOCAL_REPLICA_UID_BASE"] = str(base + int(worker[2:]) * count)


def pytest_collection_modifyitems(config, items) -> None:
    """The `slow` tests (15 s and more each) run first. pytest-xdist's worksteal gives each
    worker a share of the collection in order and the idle one steals from the end of the
    other's: with the long tests at the front, every worker ends on short ones instead of
    one worker finishing a Slurm time limit's minute alone (stop 44's CI: 26 minutes)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the rest keep their order


def _pg_available() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            return None
    except Exception as e:  # noqa: BLE001 - any failure means "not reachable"
        return f"{type(e).__name__}: {e}"


@pytest.fixture
def tmp_path(request) -> Path:
    """A fresh folder per test that others may pass through (0711, not listable).

    Local replicas run as unprivileged uids when the tests run as root
    (service/backends/local/isolation.py), so the folders on the way to a run folder
    must let them pass. pytest's own tmp_path lives under /tmp/pytest-of-root, which
    every pytest session resets to 0700 (a concurrent run would break ours)."""
    base = Path(tempfile.gettempdir()) / "trainjobs-tests"
    base.mkdir(exist_ok=True)
    os.chmod(base, 0o711)
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)[:48]
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))
    os.chmod(path, 0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_database():
    """A fresh PostgreSQL database for this test session, migrated to head."""
    problem = _pg_available()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_ADMIN} is required in CI: {problem}")
        pytest.skip(f"PostgreSQL not reachable: {problem}")
    name = f"trainjobs_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        # A test database need not survive a crash of the server: a commit does not wait for
        # its WAL to reach the disk (every test commits, many of them often, on a shared disk).
        # What a commit is to every other session (visibility, locks, order) is unchanged.
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{base}/{name}"
    migrate.upgrade(url)
    yield url
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template_db(tmp_path_factory) -> Path:
    """Migrate once; each test copies the file (migrations take ~1 s)."""
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


# A module whose subject the database does not decide (the browser, the sandbox, the CLI and the
# client over HTTP, Slurm's endings, the log streams, the HTTP edge) runs on SQLite only:
# `pytestmark = ONE_DATABASE`. Its PostgreSQL run proved nothing its SQLite run did not and cost
# the suite minutes (issue 50.6). What the database decides (the store, the submit, the queue, the
# lifecycle, the ledger, ...) runs on both: tests/test_layers.py refuses the mark in those folders.
ONE_DATABASE = pytest.mark.one_database


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc) -> None:
    """ONE_DATABASE as a parametrization of db_url, for the tests that use it (a module's other
    tests need no database; a mark naming db_url would be an error for them). Added before
    pytest reads the marks, so that db_url's own two params give way to it."""
    if "db_url" in metafunc.fixturenames and metafunc.definition.get_closest_marker("one_database"):
        if not any("db_url" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")):
            metafunc.definition.add_marker(pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path) -> str:
    """Parametrised: every test using it runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        src = request.getfixturevalue("sqlite_template_db")
        dst = tmp_path / "trainjobs.db"
        dst.write_bytes(src.read_bytes())
        return f"sqlite:///{dst}"
    url = request.getfixturevalue("pg_database")
    truncate_all(url)
    return url


def truncate_all(url: str) -> None:
    """Empty every table of a PostgreSQL test database (as migrated: the lease row stays).

    DELETE, children first, rather than TRUNCATE: a TRUNCATE of the 25 tables takes 0.3-0.8 s
    on this loaded 2-core host (it rewrites each table's files and takes an exclusive lock on
    each) where deleting the few rows a test leaves takes 3-30 ms, and it runs before every
    PostgreSQL test (about half the suite)."""
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("; ".join(f"DELETE FROM {t.name}" for t in reversed(Base.metadata.sorted_tables))))
        # The migration's one lease row: every database has it.
        conn.execute(text("INSERT INTO controller_leases (name, epoch, holder) VALUES ('controller', 0, '')"))
    engine.dispose()


@pytest.fixture
def session_factory(db_url):
    engine = make_engine(db_url)
    yield make_session_factory(engine)
    engine.dispose()


def make_token(db_url: str, team: str = "alpha", role: str = "admin", name: str | None = None) -> str:
    """A real token in the database (its team made if new); returns the secret."""
    return make_tokens(db_url, team, [role], name)[role]


def make_tokens(db_url: str, team: str, roles, name: str | None = None) -> dict[str, str]:
    """A real token per role, in one transaction (an engine and a commit per token cost 60 ms
    and more a token on the loaded host, and most tests make three); role -> secret."""
    from service.auth.service import create_token, get_or_create_team

    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            t = get_or_create_team(session, team)
            secrets = {role: create_token(session, t, name or f"{role}-user", role, "tests")[1] for role in roles}
            session.commit()
            return secrets
    finally:
        engine.dispose()


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}
