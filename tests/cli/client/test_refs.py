"""`trainjobs jobs ...` takes what a person types (a unique id prefix, a display name),
lists jobs in 80 columns, and `jobs get` says how each replica ended and where the
model is (issue 25, point 2)."""
from __future__ import annotations

import json
import re

import pytest

from tests.backends.localkit import assert_no_processes
from tests.cli.conftest import template_file

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # tests/client: PostgreSQL too


def submit(cli, *args: str) -> str:
    run = cli("jobs", "submit", "tiny", "-q", *args)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_prefixes_and_names_wherever_a_job_is_taken(cli, tmp_path, work_dir):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    gate = tmp_path / "gate"
    held = submit(cli, "--name", "held-run", "--set", f'chief.container.args=["--wait-file","{gate}"]')
    done = submit(cli, "--name", "done-run", "--wait")
    prefix = held.replace("-", "")[:6]
    shown = json.loads(cli("jobs", "get", prefix, "-o", "json").stdout)
    assert shown["id"] == held
    assert json.loads(cli("jobs", "get", "done-run", "-o", "json").stdout)["id"] == done
    assert "[workerpool1-0] workerpool1-0 line 2" in cli("jobs", "logs", "done-run").stdout.splitlines()
    assert cli("jobs", "events", done[:8]).returncode == 0
    assert cli("jobs", "export", "done-run").returncode == 0
    assert cli("jobs", "wait", prefix, "--timeout", "0.2").returncode == 124
    cancelled = cli("jobs", "cancel", "held-run", "--wait", "-o", "json")
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["id"] == held

    # A relaunch keeps the name: two jobs answer to it, and the CLI says which.
    again = cli("jobs", "relaunch", "done-run", "--wait", "-o", "json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)["id"]
    ambiguous = cli("jobs", "logs", "done-run")
    assert ambiguous.returncode == 2 and "Traceback" not in ambiguous.stderr
    assert "'done-run' matches 2 jobs" in ambiguous.stderr
    rows = [ln for ln in ambiguous.stderr.splitlines() if ln.startswith("  ")]
    assert [ln.split()[0] for ln in rows] == [second, done]           # newest first, whole ids
    assert all("done-run" in ln and "SUCCEEDED" in ln and re.search(r"\d+[smhd] ago", ln) for ln in rows)
    as_json = json.loads(cli("jobs", "get", "done-run", "-o", "json").stderr.strip().splitlines()[-1])
    assert [c["id"] for c in as_json["candidates"]] == [second, done]

    nothing = cli("jobs", "get", "no-such-run")
    assert nothing.returncode == 2 and "no job has an id starting with 'no-such-run' or the name" in nothing.stderr
    short = cli("jobs", "get", held[:3])
    assert short.returncode == 2 and "at least 4 hex digits" in short.stderr
    assert_no_processes(work_dir)


def test_list_fits_80_columns_and_get_shows_each_replica(cli, tmp_path, work_dir):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    long_name = "a-rather-long-display-name-for-an-experiment-" + "x" * 60
    ok = submit(cli, "--name", long_name, "-p", "epochs=2", "--wait")
    failed = cli("jobs", "submit", "tiny", "-q", "--set", 'workers.container.args=["--exit","3"]', "--wait")
    assert failed.returncode == 1
    failed_id = failed.stdout.strip()

    table = cli("jobs", "list", COLUMNS="80").stdout.splitlines()
    assert table[0].split() == ["ID", "STATE", "AGE", "NAME", "TEMPLATE", "PROGRESS"]
    assert len(table) == 3 and all(len(ln) <= 80 for ln in table), table
    row = next(ln for ln in table if ln.startswith(ok[:8]))
    assert "SUCCEEDED" in row and "a-rather-long" in row and "\u2026" in row and long_name not in row
    assert any(ln.startswith(failed_id[:8]) and "FAILED" in ln for ln in table)
    wide = cli("jobs", "list", "-o", "wide", COLUMNS="80").stdout
    assert long_name in wide and ok in wide                       # whole, however long
    assert [j["display_name"] for j in json.loads(cli("jobs", "list", "-o", "json").stdout)][1] == long_name

    shown = cli("jobs", "get", failed_id[:8]).stdout
    lines = {ln.split()[0]: ln.split() for ln in shown.splitlines() if ln.startswith("workerpool")}
    chief, worker = lines["workerpool0-0"], lines["workerpool1-0"]
    assert worker[1:4] == ["worker", "FAILED", "3"] and re.fullmatch(r"\d+s|\d+m\d\ds", worker[4]), worker
    # The chief was stopped by the service when the worker failed, or had ended on its own.
    assert chief[2] in ("STOPPED", "SUCCEEDED") and re.fullmatch(r"-?\d+", chief[3]), chief
    assert re.search(r"^duration\s+\d+", shown, re.M)
    view = json.loads(cli("jobs", "get", ok, "-o", "json").stdout)
    model = view["cluster"][0]["env"]["AIP_MODEL_DIR"]
    good = cli("jobs", "get", ok).stdout
    assert model.startswith(str(work_dir)) and re.search(r"^model\s+" + re.escape(model), good, re.M)
    assert re.search(r"^tensorboard\s+" + re.escape(view["cluster"][0]["env"]["AIP_TENSORBOARD_LOG_DIR"]), good, re.M)
    assert all(r["status"]["state"] == "SUCCEEDED" and r["status"]["exit_code"] == 0 for r in view["cluster"])
    assert_no_processes(work_dir)
