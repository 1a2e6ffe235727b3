"""`trainjobs jobs ...` for people (text) and scripts (--output json, exit codes)."""
from __future__ import annotations

import json
import re

import pytest

from tests.backends.localkit import assert_no_processes
from tests.cli.conftest import template_file

LINE = re.compile(r"^\[workerpool\d-\d\] ")
# The commands only speak HTTP; tests/client runs the same flows on PostgreSQL too.
pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_submit_follow_then_inspect(cli, tmp_path, work_dir):
    assert cli("templates", "apply", "-f", str(template_file(tmp_path))).returncode == 0
    run = cli("jobs", "submit", "tiny", "-p", "epochs=3", "-p", "tag=007", "--label", "who=me", "--follow")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines and all(LINE.match(ln) for ln in lines), lines
    # A string parameter stays a string: 007, not 7.
    assert "[workerpool0-0] tag=007" in lines and "[workerpool1-0] workerpool1-0 line 2" in lines
    assert "SUCCEEDED" in run.stderr
    job_id = re.search(r"submitted job ([0-9a-f-]{36})", run.stderr).group(1)

    listed = json.loads(cli("jobs", "list", "-o", "json").stdout)
    assert [j["id"] for j in listed] == [job_id] and listed[0]["progress"]["epoch"] == 3
    table = cli("jobs", "list").stdout
    assert job_id[:8] in table and job_id not in table and "SUCCEEDED" in table and "epoch 3/3" in table
    assert "tiny:v1" in table and re.search(r"\d+[smhd] ago", table)
    wide = cli("jobs", "list", "-o", "wide").stdout
    assert job_id in wide and "local" in wide
    assert cli("jobs", "list", "--state", "FAILED", "-o", "json").stdout.strip() == "[]"
    assert [j["id"] for j in json.loads(cli("jobs", "list", "--label", "who=me", "--since", "1h",
                                            "-o", "json").stdout)] == [job_id]

    got = json.loads(cli("jobs", "get", job_id, "-o", "json").stdout)
    assert got["state"] == "SUCCEEDED" and got["parameters"] == {"epochs": 3, "tag": "007"}
    assert "workerpool1-0" in cli("jobs", "get", job_id).stdout
    events = cli("jobs", "events", job_id)
    assert "QUEUED" in events.stdout and "SUCCEEDED" in events.stdout

    worker = cli("jobs", "logs", job_id, "--replica", "workerpool1-0").stdout.splitlines()
    assert worker == ["[workerpool1-0] hello from workerpool1-0 as worker:0"] + \
        [f"[workerpool1-0] workerpool1-0 line {i}" for i in range(3)]
    as_json = [json.loads(x) for x in cli("jobs", "logs", job_id, "-o", "json").stdout.splitlines()]
    assert {x["replica"] for x in as_json} == {"workerpool0-0", "workerpool1-0"} and all(x["cursor"] for x in as_json)
    after = cli("jobs", "logs", job_id, "--since", as_json[0]["cursor"], "-o", "json").stdout.splitlines()
    assert len(after) == len(as_json) - 1
    followed = cli("jobs", "logs", job_id, "-f")
    assert sorted(followed.stdout.splitlines()) == sorted(lines) and "SUCCEEDED" in followed.stderr
    assert not (cli.cwd / "trainjobs.db").exists()  # client commands never touch a database
    assert_no_processes(work_dir)


def test_exit_codes_follow_the_final_state(cli, tmp_path, work_dir):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    failed = cli("jobs", "submit", "tiny", "--set", 'chief.container.args=["--exit","3"]', "--wait", "-o", "json")
    assert failed.returncode == 1, failed.stderr
    job = json.loads(failed.stdout)
    assert job["state"] == "FAILED" and "exit" in job["error"]["message"]

    gate = tmp_path / "never"
    blocked = cli("jobs", "submit", "tiny", "-q", "--set", f'chief.container.args=["--wait-file","{gate}"]')
    job_id = blocked.stdout.strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", job_id)
    assert cli("jobs", "wait", job_id, "--timeout", "0.5").returncode == 124
    cancelled = cli("jobs", "cancel", job_id, "--wait", "-o", "json")
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["state"] == "CANCELLED"
    assert cli("jobs", "wait", job_id).returncode == 4
    ok = cli("jobs", "submit", "tiny", "--wait")
    assert ok.returncode == 0 and "SUCCEEDED" in ok.stderr
    assert_no_processes(work_dir)


def test_dry_run_overrides_and_idempotency(cli, tmp_path):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    patch = tmp_path / "patch.yaml"
    patch.write_text("workers:\n  replica_count: 2\n")
    dry = cli("jobs", "submit", "tiny", "--dry-run", "--overrides", str(patch), "--set", "evaluator=null",
              "-o", "json")
    assert dry.returncode == 0, dry.stderr
    assert [r["task_name"] for r in json.loads(dry.stdout)["cluster"]] == \
        ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    assert "workerpool1-1" in cli("jobs", "submit", "tiny", "--dry-run", "--set", "workers.replica_count=2").stdout
    assert json.loads(cli("jobs", "list", "-o", "json").stdout) == []
    first = cli("jobs", "submit", "tiny", "--idempotency-key", "build-42", "-q").stdout
    again = cli("jobs", "submit", "tiny", "--idempotency-key", "build-42", "-q").stdout
    assert first == again and len(json.loads(cli("jobs", "list", "-o", "json").stdout)) == 1


def test_errors_are_one_clear_message_and_exit_2(cli, tmp_path):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    missing = cli("jobs", "submit", "nope")
    assert missing.returncode == 2 and "404 Not found" in missing.stderr and "Traceback" not in missing.stderr
    bad = cli("jobs", "submit", "tiny", "-p", "epochs=99", "-p", "colour=red")
    assert bad.returncode == 2
    assert "parameters.epochs" in bad.stderr and "parameters.colour" in bad.stderr
    as_json = cli("jobs", "submit", "tiny", "-p", "epochs=abc", "-o", "json")
    problem = json.loads(as_json.stderr.strip().splitlines()[-1])
    assert as_json.returncode == 2 and problem["status"] == 422 and problem["errors"][0]["field"] == "parameters.epochs"
    assert cli("jobs", "get", "not-a-uuid").returncode == 2
    nobody = cli("jobs", "list", TRAINJOBS_TOKEN=None)
    assert nobody.returncode == 2 and "trainjobs login" in nobody.stderr
    down = cli("jobs", "list", TRAINJOBS_URL="http://127.0.0.1:9")
    assert down.returncode == 3 and "could not reach" in down.stderr


def test_relaunch_with_changed_parameters_and_a_retry_shown_in_get(cli, tmp_path, work_dir):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    first = json.loads(cli("jobs", "submit", "tiny", "-p", "tag=007", "--label", "who=me", "--wait",
                           "-o", "json").stdout)
    run = cli("jobs", "relaunch", first["id"], "-p", "epochs=3", "--label", "try=2", "--wait", "-o", "json")
    assert run.returncode == 0, run.stderr
    again = json.loads(run.stdout)
    assert again["relaunch_of"] == first["id"] and again["state"] == "SUCCEEDED"
    # -p is typed as the template declares: 3 an int; the job's own tag=007 stays a string.
    assert again["parameters"] == {"tag": "007", "epochs": 3}
    assert again["labels"]["who"] == "me" and again["labels"]["try"] == "2"
    text = cli("jobs", "relaunch", again["id"], "--template-version", "latest", "--set",
               'chief.container.args=["--exit","3"]', "--set", "retry.max_attempts=2",
               "--set", "retry.exit_codes=[3]", "--set", "retry.backoff.initial_seconds=0")
    assert text.returncode == 0, text.stderr
    third = re.search(r"relaunched \S+ as job ([0-9a-f-]{36})", text.stderr).group(1)
    retried = json.loads(cli("jobs", "wait", third, "-o", "json").stdout)
    assert retried["state"] == "FAILED"
    assert retried["retried_by"] is not None
    shown = cli("jobs", "get", retried["retried_by"]).stdout
    assert "attempt" in shown and f"retry of {third}" in shown
    assert cli("jobs", "relaunch", "not-a-uuid").returncode == 2
    assert cli("jobs", "relaunch", first["id"], "--template-version", "newest").returncode == 2
    cli("jobs", "wait", retried["retried_by"])
    assert_no_processes(work_dir)
