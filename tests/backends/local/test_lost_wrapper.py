"""A replica's wrapper that ends without its exit record (killed, or failed itself) is a lost
replica: the job FAILS saying so, and the operator's log says how the wrapper ended and how its
own log ends (a traceback when it failed), so a lost replica is diagnosable, not only guessed
at as "SIGKILL or the OOM killer"."""
from __future__ import annotations

import logging
import signal

from tests.backends.localkit import job_processes
from tests.conftest import ONE_DATABASE
from tests.waiting import wait_for

pytestmark = ONE_DATABASE
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


def test_a_killed_wrapper_is_logged_with_its_status(make_client, work_dir, caplog):
    api = make_client()
    api.template("sleeper", {"container": {"image_uri": "local", "command": ["python", "-c", SLEEPER]}})
    job = api.submit("sleeper")
    api.wait_state(job["id"], "RUNNING")

    def wrapper():
        found = [p for p in job_processes(work_dir, job["id"]) if any("wrapper.py" in a for a in p.cmdline())]
        return found[0] if found else None
    wait_for(wrapper, "the replica's wrapper")
    with caplog.at_level(logging.WARNING, logger="trainjobs.backends.local"):
        wrapper().send_signal(signal.SIGKILL)
        done = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert done["state"] == "FAILED" and done["error"]["exit_code"] is None, done["error"]
    assert "disappeared without an exit status" in done["error"]["message"], done["error"]
    [said] = [r.getMessage() for r in caplog.records if "no exit record" in r.getMessage()]
    assert f"replica {done['error']['replica']}'s wrapper" in said and "ended with status -9" in said, said
    assert "its log ends: " in said
    # The job's own error (its team reads it) does not carry the wrapper's log.
    assert "its log ends" not in done["error"]["message"]


