"""`trainjobs jobs list` and `jobs get` show a preempted attempt as PREEMPTED, not as a failure
(issue 49, point 3): a real subprocess against a real service with no controller, its jobs shaped
as the engine leaves a preemption (FAILED, error.cause "preemption", attempt 2 going on)."""
from __future__ import annotations

import json

import httpx
import pytest

from tests.capacity.queuekit import add_template, queue_server, submit
from tests.conftest import bearer
from tests.ui.walkkit import fail, preempt

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def server(db_url, work_dir):  # noqa: F811
    with queue_server(db_url, work_dir) as url:
        yield url


def test_jobs_list_and_get_say_preempted(cli, server, token, db_url):
    with httpx.Client(base_url=server, timeout=60) as http:
        add_template(http, bearer(token))
        first, second, broken = (submit(http, name, bearer(token)) for name in ("trial", "trial", "broken"))
    preempt(db_url, first, second)
    fail(db_url, broken)

    rows = {line.split()[0]: line.split() for line in cli("jobs", "list").stdout.splitlines()[1:]}
    assert rows[first[:8]][1] == "PREEMPTED" and rows[broken[:8]][1] == "FAILED"
    wide = {line.split()[0]: line for line in cli("jobs", "list", "-o", "wide").stdout.splitlines()[1:]}
    assert "PREEMPTED" in wide[first] and "FAILED" not in wide[first]
    listed = {j["id"]: j for j in json.loads(cli("jobs", "list", "-o", "json").stdout)}
    assert listed[first]["preempted"] is True and listed[broken]["preempted"] is False
    assert listed[first]["state"] == "FAILED"            # the stored state, for scripts

    got = cli("jobs", "get", first).stdout
    assert "PREEMPTED" in got and "attempt 2 goes on" in got and second in got
    assert "error" not in [line.split()[0] for line in got.splitlines() if line.strip()]
    assert "error" in [line.split()[0] for line in cli("jobs", "get", broken).stdout.splitlines() if line.strip()]
