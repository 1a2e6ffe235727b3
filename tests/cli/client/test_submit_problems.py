"""`trainjobs jobs submit` shows every problem of one 422 (issue 25), one line each."""
from __future__ import annotations

import json

import pytest

from tests.cli.conftest import template_file

# The command only speaks HTTP; tests/jobs/test_every_problem_at_once.py covers PostgreSQL.
pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_a_submit_with_several_mistakes_lists_them_all(cli, tmp_path):
    assert cli("templates", "apply", "-f", str(template_file(tmp_path))).returncode == 0
    args = ("jobs", "submit", "tiny", "-p", "epochs=99", "--set", "scheduling.timeout_seconds=-5",
            "--set", "chief.replica_count=2", "--set", "workers.replica_count=0",
            "--set", "workers.machine_type=n9-giant-7")
    bad = cli(*args)
    assert bad.returncode == 2 and "422" in bad.stderr and "Traceback" not in bad.stderr
    listed = [ln.strip() for ln in bad.stderr.splitlines() if ln.strip().startswith("- ")]
    fields = [ln[2:].split(":", 1)[0] for ln in listed]
    assert sorted(fields) == sorted(["spec.scheduling.timeout_seconds", "spec.workers.replica_count",
                                     "parameters.epochs", "spec.chief.replica_count",
                                     "spec.workers.machine_type"]), bad.stderr
    as_json = cli(*args, "-o", "json")
    problem = json.loads(as_json.stderr.strip().splitlines()[-1])
    assert as_json.returncode == 2 and sorted(e["field"] for e in problem["errors"]) == sorted(fields)
