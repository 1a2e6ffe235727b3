"""A retry that resumes, end to end: the real trainer (a chief and a worker, MWMS on
127.0.0.1, tiny CNN on synthetic data) as a local job with a retry policy. The worker is
SIGKILLed during epoch 2; the job FAILS naming the signal, attempt 2 is created in the
same transaction, runs on the first attempt's checkpoint directory, starts at epoch 2
(BackupAndRestore) and SUCCEEDS. Real TensorFlow, so one run only (SQLite)."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from service.demo import demo_template
from tests.backends.localkit import Api, assert_no_processes, kill_all, settings_for
from tests.conftest import make_token
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def progress_lines(log: Path) -> list[dict]:
    """The trainer's JSON progress lines in a replica's log file (wrapper.py's format:
    `<timestamp> <stream> <text>` a line)."""
    out = []
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return out
    for record in text.splitlines():
        parts = record.split(" ", 2)
        try:
            line = json.loads(parts[2]) if len(parts) == 3 and parts[1] == "stdout" else None
        except ValueError:
            continue
        if isinstance(line, dict) and "event" in line:
            out.append(line)
    return out


def test_a_killed_replica_is_retried_and_resumes_at_the_next_epoch(api_client, sqlite_template_db, tmp_path):
    db = tmp_path / "trainjobs.db"
    db.write_bytes(sqlite_template_db.read_bytes())
    url = f"sqlite:///{db}"
    work_dir = tmp_path / "runs"
    token = make_token(url, "alpha", "admin")
    template = demo_template().model_dump(mode="json", exclude_none=True)
    template["name"] = "mwms-retry"
    template["spec"]["retry"] = {"max_attempts": 2, "backoff": {"initial_seconds": 0}}
    try:
        with api_client(settings_for(url, work_dir), token) as client:
            api = Api(client)
            r = client.post("/v1/templates", json=template)
            assert r.status_code == 201, r.text
            # Epochs long enough (30 steps) that the kill lands well inside epoch 2.
            first = api.submit("mwms-retry", parameters={"epochs": 3, "steps_per_epoch": 30})
            run = work_dir / first["id"]
            chief_log = run / "logs" / "workerpool0-0.log"
            wait_for(lambda: any(e["event"] == "epoch_end" and e["epoch"] == 1 for e in progress_lines(chief_log)),
                     "the chief's epoch-1 progress line", timeout=600, interval=0.02)
            worker_pid = json.loads((run / "replicas" / "workerpool1-0.started").read_text())["pid"]
            os.kill(worker_pid, signal.SIGKILL)

            failed = api.wait_state(first["id"], "FAILED", "SUCCEEDED", timeout=120)
            assert failed["state"] == "FAILED"
            assert failed["error"]["replica"] == "workerpool1-0" and failed["error"]["signal"] == "SIGKILL"
            assert [e["epoch"] for e in progress_lines(chief_log) if e["event"] == "epoch_end"] == [1], \
                "the kill came too late"
            reason = [e for e in api.events(first["id"]) if e["to_state"] == "FAILED"][0]["reason"]
            assert "killed by SIGKILL" in reason and "retried as job" in reason and "(attempt 2 of 2)" in reason

            second_id = api.job(first["id"])["retried_by"]
            assert second_id is not None
            done = api.wait_state(second_id, "SUCCEEDED", "FAILED", timeout=600)
            assert done["state"] == "SUCCEEDED", done["error"]
            assert (done["attempt"], done["retry_of"]) == (2, first["id"])
            second_events = progress_lines(work_dir / second_id / "logs" / "workerpool0-0.log")
            start = [e for e in second_events if e["event"] == "train_start"][0]
            assert start["initial_epoch"] == 2, start   # resumed, not started again
            assert [e["epoch"] for e in second_events if e["event"] == "epoch_end"] == [2, 3]
            assert done["progress"]["epoch"] == 3 and done["progress"]["phase"] == "finished"
            # The model lands in the job's (first attempt's) output folder.
            assert (run / "output" / "model" / "saved_model.pb").is_file()
            assert Path(done["progress"]["model_dir"]).resolve() == (run / "output" / "model").resolve()
            assert_no_processes(work_dir)
    finally:
        kill_all(work_dir)
