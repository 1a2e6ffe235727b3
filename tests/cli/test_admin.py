"""The `trainjobs` command: first-start admin token, tokens create|list|revoke."""
import os
import re
import subprocess
import sys

from service.slices import Settings
from tests.waiting import wait_for


def run(tmp_path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOG_FORMAT": "text"}
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def client(api_client, tmp_path, secret):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", local_work_dir=tmp_path / "runs",
                        run_reconciler=False)
    return api_client(settings, secret)


def test_first_start_prints_one_admin_token_once(api_client, tmp_path):
    first = run(tmp_path, "prepare")
    assert first.returncode == 0, first.stderr
    tokens = re.findall(r"tj_[A-Za-z0-9_-]{20,}", first.stderr)
    assert len(set(tokens)) == 1
    assert "mwms-demo" in first.stderr
    second = run(tmp_path, "prepare")
    assert re.findall(r"tj_[A-Za-z0-9_-]{20,}", second.stderr) == []
    with client(api_client, tmp_path, tokens[0]) as c:
        me = c.get("/v1/tokens/me").json()
        assert (me["team"], me["role"]) == ("default", "admin")
        assert [t["name"] for t in c.get("/v1/templates").json()["items"]] == ["mwms-demo"]


def test_tokens_create_list_revoke(api_client, tmp_path):
    assert run(tmp_path, "db", "upgrade", "--create").returncode == 0  # tokens refuse a missing database
    made = run(tmp_path, "tokens", "create", "--team", "vision", "--role", "member", "--name", "alice")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("tj_")
    listed = run(tmp_path, "tokens", "list", "--team", "vision")
    assert "alice" in listed.stdout and "member" in listed.stdout and "active" in listed.stdout
    assert secret not in listed.stdout
    token_id = listed.stdout.split()[0]
    with client(api_client, tmp_path, secret) as c:
        assert c.get("/v1/jobs").status_code == 200
        assert run(tmp_path, "tokens", "revoke", token_id).returncode == 0
        assert c.get("/v1/jobs").status_code == 401
    assert "revoked" in run(tmp_path, "tokens", "list").stdout
    bad = run(tmp_path, "tokens", "create", "--team", "Bad Team", "--role", "viewer", "--name", "x")
    assert bad.returncode == 2 and "team names are lowercase" in bad.stderr


def _serve_request_lines(tmp_path, level_env: str, *flags: str) -> list[str]:
    """Serve, answer a request, stop; the access-log lines it wrote (`"msg": "request"`)."""
    import json
    import signal

    import httpx

    from tests.servekit import free_port
    port = free_port()
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOCAL_WORK_DIR": str(tmp_path / "runs"), "TRAINJOBS_LOG_LEVEL": level_env,
           "TRAINJOBS_SEED_DEMO_TEMPLATE": "false", "TRAINJOBS_RUN_RECONCILER": "false"}
    log = tmp_path / f"serve-{level_env}-{len(flags)}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), *flags],
                                env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
                def healthy() -> bool:
                    assert proc.poll() is None, log.read_text()
                    try:
                        return c.get("/healthz").status_code == 200
                    except httpx.HTTPError:
                        return False
                wait_for(healthy, "serve to answer /healthz", 120, 0.1)
                assert c.get("/healthz").status_code == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)  # everything it logged is in the file once it has exited
    lines = []
    for line in log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("logger") == "trainjobs.access" and record.get("msg") == "request":
            lines.append(line)
    return lines


def test_serve_logs_at_the_level_of_its_setting_unless_told_otherwise(tmp_path):
    # TRAINJOBS_LOG_LEVEL=warning: no access-log line for each request (they are INFO)...
    assert _serve_request_lines(tmp_path, "WARNING") == []
    # ...and --log-level wins over the setting.
    assert any('"/healthz"' in line for line in _serve_request_lines(tmp_path, "WARNING", "--log-level", "info"))
