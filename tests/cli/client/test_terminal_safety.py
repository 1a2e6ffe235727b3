"""What a replica prints and what a teammate stored reach a terminal as text: the CLI
writes control and bidirectional characters as escapes (\\x1b, \\u202e), never raw,
while `-o json` keeps the exact text."""
from __future__ import annotations

import io
import json
import re
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from sqlalchemy import update

from service.cli.client import render
from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory
from tests.cli.conftest import template_file

# OSC 52 (set the clipboard), a cursor move up with erase (hides the line above), a bidi override.
HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07up\x1b[1A\x1b[2Kx\u202eevil\x9b"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)   # the commands only speak HTTP
def test_log_lines_and_stored_names_are_escaped_json_keeps_them(cli, tmp_path, db_url, work_dir):
    assert cli("templates", "apply", "-f", str(template_file(tmp_path))).returncode == 0
    # A string parameter the chief prints as its last line: what a replica could print anyway.
    run = cli("jobs", "submit", "tiny", "-p", f"tag={HOSTILE}", "--follow")
    assert run.returncode == 0, run.stderr
    assert not RAW.search(run.stdout) and not RAW.search(run.stderr)
    assert "tag=\\x1b]52;c;cm0gLXJmIH4=\\x07up\\x1b[1A\\x1b[2Kx\\u202eevil\\x9b" in run.stdout
    job_id = re.search(r"submitted job ([0-9a-f-]{36})", run.stderr).group(1)

    logs = cli("jobs", "logs", job_id)
    assert logs.returncode == 0 and not RAW.search(logs.stdout) and "\\x1b]52" in logs.stdout
    exact = [json.loads(x)["message"] for x in cli("jobs", "logs", job_id, "-o", "json").stdout.splitlines()]
    assert f"tag={HOSTILE}" in exact

    # A name stored before names were checked (written here behind the API's back).
    engine = make_engine(db_url)
    with make_session_factory(engine)() as session:
        session.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(display_name=f"name{HOSTILE}"))
        session.commit()
    engine.dispose()
    for args in (("jobs", "list"), ("jobs", "get", job_id), ("jobs", "events", job_id)):
        out = cli(*args)
        assert out.returncode == 0 and not RAW.search(out.stdout + out.stderr), args
    assert "name\\x1b]52" in cli("jobs", "list").stdout
    assert json.loads(cli("jobs", "get", job_id, "-o", "json").stdout)["display_name"] == f"name{HOSTILE}"


def test_tables_escape_on_a_real_terminal():
    """Rich on a terminal (colours on): the escapes it adds are its own, none from the data."""
    from rich.console import Console
    now = datetime.now(UTC)
    job = SimpleNamespace(id=uuid.uuid4(), display_name=f"n{HOSTILE}", template=SimpleNamespace(name="t", version=1),
                          backend="local", state="RUNNING", progress=None, created_at=now)
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=300).print(render.jobs_table([job]))
    text = out.getvalue()
    assert "\x07" not in text and "\x1b]" not in text and "\u202e" not in text and "\x1b[1A" not in text
    assert "n\\x1b]52" in text
    line = SimpleNamespace(replica="workerpool0-0\x1b[2K", message=HOSTILE)
    assert not RAW.search(render.log_line(line))


def test_template_yaml_escapes_them_and_reads_back_the_same():
    import yaml

    from service.cli.client.templates import as_yaml
    body = {"description": "stored before the check: a\u202eb", "spec": {"container": {"args": [HOSTILE, "é"]}}}
    text = as_yaml("t", body)
    assert not RAW.search(text)
    back = yaml.safe_load(text)
    assert back["description"] == body["description"] and back["spec"] == body["spec"]
    assert "é" in as_yaml("t", {"description": "é", "spec": {}})   # plain Unicode stays as it is


def test_errors_and_reasons_keep_their_line_breaks_and_escape_the_rest():
    """An error with its log tail reads as lines (it printed `\\x0a` before); ESC and bidi
    overrides in it are still escapes."""
    from rich.console import Console
    now = datetime.now(UTC)
    reason = f"The replica chief-0 exited 1. Last lines of its log:\nTraceback{HOSTILE}\nValueError: bad"
    event = SimpleNamespace(at=now, from_state="RUNNING", to_state="FAILED", actor="slurm", reason=reason)
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=300).print(render.events_table([event]))
    text = out.getvalue()
    assert "\\x0a" not in text and "\x1b]" not in text and "\u202e" not in text and "\x1b[1A" not in text
    lines = [re.sub("\x1b\\[[0-9;]*m", "", line) for line in text.splitlines()]   # rich's own colours
    at = next(i for i, line in enumerate(lines) if "Last lines of its log:" in line)
    column = lines[at].index("The replica")
    # The next lines sit under the reason's column: indented, on lines of their own.
    assert lines[at + 1].index("Traceback") == column and "\\x1b]52" in lines[at + 1]
    assert lines[at + 2].index("ValueError: bad") == column
