"""Where the client finds the service and its token: arguments first, then
TRAINJOBS_URL / TRAINJOBS_TOKEN, then the config file `trainjobs login` writes
(TRAINJOBS_CONFIG, or $XDG_CONFIG_HOME/trainjobs/config.json, readable by its
owner only)."""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainjobs_client.errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Config:
    url: str
    token: str | None
    source: str  # where the token came from, to say so in errors


def config_path() -> Path:
    explicit = os.environ.get("TRAINJOBS_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "trainjobs" / "config.json"


def read_config_file(path: Path | None = None) -> dict:
    path = path or config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the trainjobs config file {path}: {e}; "
                         "run `trainjobs login` again or delete it") from None
    return data if isinstance(data, dict) else {}


def save_config(url: str, token: str, path: Path | None = None) -> Path:
    """Write url and token, mode 0600 from the first byte (never readable by others)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"url": url, "token": token}, f, indent=2)
            f.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def resolve(url: str | None = None, token: str | None = None) -> Config:
    file = None

    def from_file(key: str):
        nonlocal file
        if file is None:
            file = read_config_file()
        value = file.get(key)
        return value if isinstance(value, str) and value else None

    env_url, env_token = os.environ.get("TRAINJOBS_URL"), os.environ.get("TRAINJOBS_TOKEN")
    resolved_url = url or env_url or from_file("url") or DEFAULT_URL
    if token:
        return Config(resolved_url.rstrip("/"), token, "the token argument")
    if env_token:
        return Config(resolved_url.rstrip("/"), env_token, "TRAINJOBS_TOKEN")
    file_token = from_file("token")
    # A token saved for another service must not be sent to this one.
    if file_token and (from_file("url") or DEFAULT_URL).rstrip("/") == resolved_url.rstrip("/"):
        return Config(resolved_url.rstrip("/"), file_token, str(config_path()))
    return Config(resolved_url.rstrip("/"), None, "none")
