"""`trainjobs login|whoami|logout`: the saved config, and the environment over it."""
from __future__ import annotations

import json
import os
import stat

import pytest

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # no database work of its own


@SQLITE_ONLY
def test_login_saves_a_private_config_the_commands_use(cli, server, token, tmp_path):
    config = tmp_path / "home" / "trainjobs.json"
    logged = cli("login", "--url", server, "--token-stdin", input=token + "\n", TRAINJOBS_URL=None,
                 TRAINJOBS_TOKEN=None)
    assert logged.returncode == 0, logged.stderr
    assert "as admin-user (admin of team alpha)" in logged.stderr and str(config) in logged.stderr
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    assert json.loads(config.read_text()) == {"url": server, "token": token}

    # With nothing in the environment, the commands use what login saved.
    me = cli("whoami", TRAINJOBS_URL=None, TRAINJOBS_TOKEN=None)
    assert me.returncode == 0 and f"admin-user (admin of team alpha) at {server}; token from {config}" in me.stdout
    assert cli("jobs", "list", "-o", "json", TRAINJOBS_URL=None, TRAINJOBS_TOKEN=None).stdout.strip() == "[]"
    # TRAINJOBS_TOKEN overrides the saved token.
    wrong = cli("jobs", "list", TRAINJOBS_URL=None, TRAINJOBS_TOKEN="tj_wrong")
    assert wrong.returncode == 2 and "401" in wrong.stderr and "TRAINJOBS_TOKEN" in wrong.stderr

    assert cli("logout").returncode == 0
    assert json.loads(config.read_text())["token"] == ""
    gone = cli("whoami", TRAINJOBS_URL=None, TRAINJOBS_TOKEN=None)
    assert gone.returncode == 2 and "no token" in gone.stderr


@SQLITE_ONLY
def test_a_bad_token_or_url_saves_nothing(cli, server, tmp_path):
    config = tmp_path / "home" / "trainjobs.json"
    bad = cli("login", "--url", server, input="tj_nope\n", TRAINJOBS_TOKEN=None)
    assert bad.returncode == 2 and "401" in bad.stderr and not config.exists()
    nowhere = cli("login", "--url", "http://127.0.0.1:9", input="tj_nope\n", TRAINJOBS_TOKEN=None)
    assert nowhere.returncode == 3 and not config.exists()
    empty = cli("login", "--url", server, input="\n")
    assert empty.returncode == 2 and "no token given" in empty.stderr
