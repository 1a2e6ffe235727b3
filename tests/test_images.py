"""The images: both Dockerfiles lint clean with hadolint, and the API image's
production rules hold (no Docker engine here, so the rules the image relies on are
checked on the real `trainjobs` command with the image's environment)."""
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.servekit import Serve

ROOT = Path(__file__).resolve().parents[1]
HADOLINT = Path(sys.executable).with_name("hadolint")


@pytest.mark.parametrize("dockerfile", ["Dockerfile.api", "Dockerfile.trainer"])
def test_dockerfiles_lint_clean(dockerfile):
    r = subprocess.run([str(HADOLINT), "--no-color", dockerfile], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_api_image_is_built_for_production():
    text = (ROOT / "Dockerfile.api").read_text()
    assert "USER 10001" in text and "HEALTHCHECK" in text and "/readyz" in text
    assert "TRAINJOBS_BACKENDS='[\"vertex\"]'" in text and "TRAINJOBS_IN_CONTAINER=true" in text
    assert "uv sync --frozen" in text and "COPY pyproject.toml uv.lock" in text
    ignore = (ROOT / "Dockerfile.api.dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") if "*" in ignore else 0] == "*"  # nothing unless listed
    assert not [line for line in ignore if line.startswith("!") and (".venv" in line or "tests" in line)]


def image_env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
    env.update({"TRAINJOBS_IN_CONTAINER": "true", "TRAINJOBS_SEED_DEMO_TEMPLATE": "false",
                "TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}, **extra)
    return env


def prepare(env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "service.cli", "prepare"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_sqlite_inside_a_container_is_refused_unless_allowed(tmp_path):
    r = prepare(image_env(tmp_path))
    assert r.returncode != 0 and "refusing to start on a SQLite file inside a container" in r.stderr
    assert not (tmp_path / "db.sqlite").exists()
    ok = prepare(image_env(tmp_path, TRAINJOBS_ALLOW_SQLITE_IN_CONTAINER="true",
                           TRAINJOBS_BOOTSTRAP_TOKEN_FILE=str(tmp_path / "token")))
    assert ok.returncode == 0, ok.stderr


def test_first_admin_token_goes_to_a_private_file_not_the_log(tmp_path):
    token_file = tmp_path / "secrets" / "admin-token"
    r = prepare(image_env(tmp_path, TRAINJOBS_ALLOW_SQLITE_IN_CONTAINER="true",
                          TRAINJOBS_BOOTSTRAP_TOKEN_FILE=str(token_file)))
    assert r.returncode == 0, r.stderr
    secret = token_file.read_text().strip()
    assert secret.startswith("tj_")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert secret not in r.stdout + r.stderr and str(token_file) in r.stderr


def test_first_admin_token_from_a_secret(tmp_path):
    secret = "tj_" + "s" * 40
    env = image_env(tmp_path, TRAINJOBS_ALLOW_SQLITE_IN_CONTAINER="true", TRAINJOBS_BOOTSTRAP_TOKEN=secret)
    assert prepare(env).returncode == 0
    weak = prepare(image_env(tmp_path / "other", TRAINJOBS_ALLOW_SQLITE_IN_CONTAINER="true",
                             TRAINJOBS_BOOTSTRAP_TOKEN="tj_short"))
    assert weak.returncode != 0 and "TRAINJOBS_BOOTSTRAP_TOKEN" in weak.stderr
    service = Serve(tmp_path / "cwd", {**{k: v for k, v in env.items() if k.startswith("TRAINJOBS_")},
                                       "TRAINJOBS_BACKENDS": '["local"]', "TRAINJOBS_DEFAULT_BACKEND": "local"})
    try:
        service.ready()
        r = httpx.get(service.url + "/v1/templates", headers={"Authorization": f"Bearer {secret}"})
        assert r.status_code == 200
    finally:
        service.stop()
