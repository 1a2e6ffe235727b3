"""The `trainjobs` command as a real subprocess against a real service (uvicorn
in a thread, local backend, SQLite and PostgreSQL)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.conftest import token, work_dir  # noqa: F401
from tests.client.conftest import anyio_backend, server, tj, viewer_token  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
    env.update(TRAINJOBS_CONFIG=str(tmp_path / "home" / "trainjobs.json"), TRAINJOBS_LOG_FORMAT="text",
               PYTHONPATH=str(ROOT), COLUMNS="200")
    env.update(extra)
    return env


@pytest.fixture
def cli(server, token, tmp_path):  # noqa: F811
    """cli(*args, input=None, **env) -> CompletedProcess; speaks to the server as team
    alpha's admin unless env overrides TRAINJOBS_URL / TRAINJOBS_TOKEN."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def run(*args: str, input: str | None = None, **env: str) -> subprocess.CompletedProcess:
        full = cli_env(tmp_path, TRAINJOBS_URL=server, TRAINJOBS_TOKEN=token)
        full.update(env)
        full = {k: v for k, v in full.items() if v is not None}
        return subprocess.run([sys.executable, "-m", "service.cli", *args], env=full, cwd=cwd, input=input,
                              capture_output=True, text=True, timeout=180)
    run.cwd = cwd
    return run


TEMPLATE_YAML = """\
name: tiny
description: a chief that reports epochs and a worker
spec:
  container:
    image_uri: trainjobs-test:1
    command: [python, {program}]
  chief:
    container:
      args: [--epochs, "${{epochs}}", --lines, "2", --message, "tag=${{tag}}"]
  workers:
    replica_count: 1
    container:
      args: [--lines, "3"]
  base_output_directory: gs://trainjobs-test/run
parameters:
  - {{name: epochs, type: int, default: 2, minimum: 1, maximum: 10}}
  - {{name: tag, type: string, default: x}}
"""


def template_file(tmp_path: Path) -> Path:
    from tests.backends.localkit import PROGRAM
    path = tmp_path / "tiny.yaml"
    path.write_text(TEMPLATE_YAML.format(program=PROGRAM))
    return path
