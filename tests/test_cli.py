"""The `trainjobs` command: first-start admin token, tokens create|list|revoke."""
import os
import re
import subprocess
import sys

from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings
from tests.conftest import bearer


def run(tmp_path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOG_FORMAT": "text"}
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def client(tmp_path, secret) -> TestClient:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", local_work_dir=tmp_path / "runs",
                        run_reconciler=False)
    return TestClient(create_app(settings), headers=bearer(secret))


def test_first_start_prints_one_admin_token_once(tmp_path):
    first = run(tmp_path, "prepare")
    assert first.returncode == 0, first.stderr
    tokens = re.findall(r"tj_[A-Za-z0-9_-]{20,}", first.stderr)
    assert len(set(tokens)) == 1
    assert "mwms-demo" in first.stderr
    second = run(tmp_path, "prepare")
    assert re.findall(r"tj_[A-Za-z0-9_-]{20,}", second.stderr) == []
    with client(tmp_path, tokens[0]) as c:
        me = c.get("/v1/tokens/me").json()
        assert (me["team"], me["role"]) == ("default", "admin")
        assert [t["name"] for t in c.get("/v1/templates").json()["items"]] == ["mwms-demo"]


def test_tokens_create_list_revoke(tmp_path):
    assert run(tmp_path, "db", "upgrade", "--create").returncode == 0  # tokens refuse a missing database
    made = run(tmp_path, "tokens", "create", "--team", "vision", "--role", "member", "--name", "alice")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("tj_")
    listed = run(tmp_path, "tokens", "list", "--team", "vision")
    assert "alice" in listed.stdout and "member" in listed.stdout and "active" in listed.stdout
    assert secret not in listed.stdout
    token_id = listed.stdout.split()[0]
    with client(tmp_path, secret) as c:
        assert c.get("/v1/jobs").status_code == 200
        assert run(tmp_path, "tokens", "revoke", token_id).returncode == 0
        assert c.get("/v1/jobs").status_code == 401
    assert "revoked" in run(tmp_path, "tokens", "list").stdout
    bad = run(tmp_path, "tokens", "create", "--team", "Bad Team", "--role", "viewer", "--name", "x")
    assert bad.returncode == 2 and "team names are lowercase" in bad.stderr
