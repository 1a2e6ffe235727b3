"""Where the client finds the service and its token."""
from __future__ import annotations

import os
import stat

from trainjobs_client import Client, config_path, save_config
from trainjobs_client.config import DEFAULT_URL, resolve


def test_saved_file_is_private_and_read_back(tmp_path):
    path = save_config("http://svc:8000", "tj_secret")
    assert path == config_path() and path.parent == tmp_path
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    cfg = resolve()
    assert (cfg.url, cfg.token, cfg.source) == ("http://svc:8000", "tj_secret", str(path))


def test_arguments_beat_environment_beats_file(monkeypatch):
    save_config("http://file:1", "tj_file")
    monkeypatch.setenv("TRAINJOBS_URL", "http://env:2")
    monkeypatch.setenv("TRAINJOBS_TOKEN", "tj_env")
    assert (resolve().url, resolve().token) == ("http://env:2", "tj_env")
    assert resolve("http://arg:3", "tj_arg").token == "tj_arg"
    monkeypatch.delenv("TRAINJOBS_TOKEN")
    # The saved token belongs to the saved URL: it is never sent to another service.
    assert (resolve().url, resolve().token) == ("http://env:2", None)
    monkeypatch.delenv("TRAINJOBS_URL")
    assert (resolve().url, resolve().token) == ("http://file:1", "tj_file")


def test_nothing_configured():
    cfg = resolve()
    assert (cfg.url, cfg.token) == (DEFAULT_URL, None)


def test_the_token_is_sent_as_a_bearer(server, token):
    save_config(server, token)
    with Client() as tj:  # everything from the saved file
        assert tj.url == server and tj.whoami().team == "alpha"


def test_a_corrupt_file_is_a_clear_error():
    import pytest

    from trainjobs_client import ConfigError
    config_path().write_text("{not json")
    with pytest.raises(ConfigError) as bad:
        resolve()
    assert str(config_path()) in str(bad.value) and "trainjobs login" in str(bad.value)
