"""The client against the real service: a uvicorn server in a thread with the
local backend and its reconciler, on SQLite and on PostgreSQL. Jobs run
tests/backends/programs/replica.py (standard library only, so they finish fast)."""
from __future__ import annotations

import pytest

from service.app import create_app
from tests.backends.conftest import token, work_dir  # noqa: F401
from tests.backends.localkit import settings_for, spec, thread_server
from tests.conftest import make_token


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_user_config(tmp_path, monkeypatch):
    """Nothing from the machine's environment or a real config file leaks in."""
    for var in ("TRAINJOBS_URL", "TRAINJOBS_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRAINJOBS_CONFIG", str(tmp_path / "trainjobs-config.json"))


@pytest.fixture
def server(db_url, work_dir):  # noqa: F811
    """Base URL of the real app on 127.0.0.1."""
    with thread_server(create_app(settings_for(db_url, work_dir))) as url:
        yield url


@pytest.fixture
def viewer_token(db_url) -> str:
    return make_token(db_url, "alpha", "viewer")


@pytest.fixture
def tj(server, token):  # noqa: F811
    from trainjobs_client import Client
    with Client(server, token, backoff=0.01) as client:
        yield client


def replica_spec(*chief_args: str, workers: list[str] | None = None) -> dict:
    return spec(list(chief_args), workers=workers)


TINY_PARAMETERS = [{"name": "epochs", "type": "int", "default": 2, "minimum": 1, "maximum": 10},
                   {"name": "tag", "type": "string", "default": "x"}]


def tiny_spec() -> dict:
    """A chief printing `epochs` progress lines and a worker printing three lines."""
    return replica_spec("--epochs", "${epochs}", "--lines", "2", "--message", "tag=${tag}",
                        workers=["--lines", "3"])
