"""On a terminal, `jobs submit --follow` keeps one status line under the log lines, redrawn
in place: what the job is doing before training starts, then epoch, steps and metrics, never
the trainer's raw JSON (run here in a real pseudo-terminal). Piped, the same progress comes
as plain lines with no cursor control."""
from __future__ import annotations

import json
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
def test_follow_shows_one_live_status_line_on_a_terminal(cli, server, token, tmp_path):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    env = cli_env(tmp_path, TRAINJOBS_URL=server, TRAINJOBS_TOKEN=token, TERM="xterm-256color")
    code, screen = run_in_terminal(["jobs", "submit", "tiny", "-p", "epochs=3", "--follow"], env, cli.cwd)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert code == 0, plain[-3000:]
    assert "\x1b[" in screen  # redrawn in place
    # Before any progress: the job's state and what it waits for, not "0/? epochs".
    assert re.search(r"tiny-[0-9a-f]{8}  QUEUED: waiting to be launched", plain), plain[:2000]
    assert "0/?" not in plain and '"event"' not in plain and "epoch_end" not in plain
    assert re.search(r"epoch 3/3 · 10 steps · loss=0\.3333 accuracy=0\.53", plain), plain[-3000:]
    assert "[workerpool0-0] tag=x" in plain and "SUCCEEDED" in plain

    # Piped (no terminal): the progress as plain lines, nothing that moves the cursor.
    piped = cli("jobs", "submit", "tiny", "-p", "epochs=2", "--follow")
    assert piped.returncode == 0 and "\x1b" not in piped.stdout + piped.stderr
    lines = piped.stdout.splitlines()
    assert "[workerpool0-0] epoch 1/2 · 10 steps · loss=1 accuracy=0.51" in lines
    assert "[workerpool0-0] epoch 2/2 · 10 steps · loss=0.5 accuracy=0.52" in lines
    assert not any("epoch_end" in ln for ln in lines)
    # -o json keeps each line exactly as the replica wrote it.
    raw = [json.loads(x)["message"] for x in cli("jobs", "submit", "tiny", "--follow", "-o", "json").stdout.splitlines()
           if x.startswith('{"replica"')]
    assert sum('"event": "epoch_end"' in m for m in raw) == 2
