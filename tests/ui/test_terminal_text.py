"""Pages show what replicas printed and callers stored as text: control and bidirectional
characters appear as escapes (\\x1b, \\u202e), never raw, in server-rendered pages (and
job.js/jobs.js escape live lines the same way: TJ.visible)."""
from __future__ import annotations

import re
import sys
import uuid

from sqlalchemy import update

from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory
from tests.conftest import ONE_DATABASE
from tests.ui.conftest import ROOT, new_client

pytestmark = ONE_DATABASE

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07up\x1b[1A\x1b[2Kx\u202eevil\x9b"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def test_log_lines_and_stored_names_are_shown_escaped(app, api, tokens, db_url):
    spec = {"container": {"image_uri": "trainjobs-test:1", "command": [sys.executable, "-c", f"print({HOSTILE!r})"]}}
    api.template("printer", spec)
    job = api.submit("printer", display_name="printer-run")
    api.wait_state(job["id"], "SUCCEEDED")
    # A name stored before names were checked (written here behind the API's back).
    engine = make_engine(db_url)
    with make_session_factory(engine)() as session:
        session.execute(update(Job).where(Job.id == uuid.UUID(job["id"])).values(display_name=f"run{HOSTILE}"))
        session.commit()
    engine.dispose()
    c = new_client(app, tokens["viewer"])
    page = c.get(f"/ui/jobs/{job['id']}").text
    assert not RAW.search(page)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07up\\x1b[1A\\x1b[2Kx\\u202eevil\\x9b" in page   # the log line
    assert "run\\x1b]52" in page                                                     # the name
    listing = c.get("/ui/jobs").text
    assert not RAW.search(listing) and "run\\x1b]52" in listing
    # The exact text is still the API's.
    assert api.c.get(f"/v1/jobs/{job['id']}").json()["display_name"] == f"run{HOSTILE}"


def test_the_pages_scripts_escape_live_text_the_same_way():
    common = (ROOT / "service/ui/static/common.js").read_text()
    assert "function visible(text)" in common and "\\u202a-\\u202e" in common
    assert "msg.textContent = TJ.visible(l.message)" in (ROOT / "service/ui/static/job.js").read_text()


def test_the_scripts_visible_matches_the_servers():
    """TJ.visible (common.js), run by node where it is installed, escapes as service.core.text.visible does."""
    import json
    import shutil
    import subprocess

    import pytest

    from service.core.text import visible
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    common = (ROOT / "service/ui/static/common.js").read_text()
    control = re.search(r"^\s*const CONTROL = .*;$", common, re.M).group(0)
    function = re.search(r"^\s*function visible\(text\) \{.*?^\s*\}$", common, re.M | re.S).group(0)
    sample = f"line {HOSTILE} tab\there é 日本 \u2066iso\u2069 \u061c \x00 \x7f"
    script = f"{control}\n{function}\nprocess.stdout.write(JSON.stringify(visible({json.dumps(sample)})));"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out) == visible(sample) and not RAW.search(json.loads(out))
