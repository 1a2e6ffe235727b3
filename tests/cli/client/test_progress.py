"""On a terminal, `jobs submit --follow` shows an epoch bar with the metrics
under the log lines (run here in a real pseudo-terminal)."""
from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest

from tests.cli.conftest import cli_env, template_file


def run_in_terminal(args: list[str], env: dict[str, str], cwd) -> tuple[int, str]:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", *args], env=env, cwd=cwd, stdin=follower,
                            stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(120), b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_follow_shows_an_epoch_bar_on_a_terminal(cli, server, token, tmp_path):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    env = cli_env(tmp_path, TRAINJOBS_URL=server, TRAINJOBS_TOKEN=token, TERM="xterm-256color")
    code, screen = run_in_terminal(["jobs", "submit", "tiny", "-p", "epochs=3", "--follow"], env, cli.cwd)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert code == 0, plain[-3000:]
    assert re.search(r"3/3 epochs loss=0\.3333 accuracy=0\.53", plain), plain[-3000:]
    assert "[workerpool0-0] tag=x" in plain and "SUCCEEDED" in plain
    # Piped (no terminal), the same command prints log lines only.
    piped = cli("jobs", "submit", "tiny", "--follow")
    assert "epochs" not in piped.stdout.replace('"epochs"', "") and piped.returncode == 0
