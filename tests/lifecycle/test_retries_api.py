"""Retries through the API, with real local jobs (small stand-in programs, no TensorFlow),
on SQLite and PostgreSQL: which failures are retried, how many times, after which
backoff, what a cancel during the backoff does, and what both rows' events say."""
from __future__ import annotations

import json
import os
import signal
from datetime import datetime

import pytest

from tests.backends.conftest import make_client, token, work_dir  # noqa: F401 (fixtures)
from tests.backends.localkit import assert_no_processes, spec
from tests.waiting import wait_for

# A one-replica job. Attempt 1 finds no checkpoint: it writes one and exits 3. Attempt 2 finds
# it (the same checkpoint directory, written by another uid when the tests run as root) and succeeds.
RESUMING = ("import os, sys; d = os.environ['AIP_CHECKPOINT_DIR']; os.makedirs(d, exist_ok=True); "
            "p = os.path.join(d, 'mark'); seen = os.path.exists(p); "
            "print('resumed from ' + open(p).read() if seen else 'fresh start', flush=True); "
            "open(p, 'a').write(os.environ['TRAINJOBS_LOCAL_REPLICA'].split('/')[0]); "
            "sys.exit(0 if seen else 3)")


def retrying(exit_code: int, **policy) -> dict:
    out = spec(["--exit", str(exit_code)])
    out["retry"] = {"max_attempts": 3, "exit_codes": [3], "backoff": {"initial_seconds": 0}, **policy}
    return out


def attempts(api, job_id: str) -> list[dict]:
    return api.job(job_id)["attempts"]


def final_event(api, job_id: str, state: str = "FAILED") -> dict:
    return [e for e in api.events(job_id) if e["to_state"] == state][-1]


@pytest.mark.parametrize("sandbox", ["none", "namespaces"])
def test_a_retried_attempt_uses_the_first_attempts_checkpoints_and_both_rows_say_so(make_client, work_dir, sandbox):
    api = make_client(local_sandbox=sandbox)
    template = {"container": {"image_uri": "t:1", "command": ["python", "-c", RESUMING]},
                "retry": {"max_attempts": 3, "exit_codes": [3], "backoff": {"initial_seconds": 0}}}
    api.template("resumes", template)
    first = api.submit("resumes")
    failed = api.wait_state(first["id"], "FAILED", "SUCCEEDED")
    assert failed["state"] == "FAILED" and failed["error"]["exit_code"] == 3
    second_id = wait_for(lambda: api.job(first["id"])["retried_by"], "the second attempt")
    second = api.wait_state(second_id, "SUCCEEDED", "FAILED")
    assert second["state"] == "SUCCEEDED", second["error"]
    assert (second["attempt"], second["retry_of"]) == (2, first["id"])
    assert [a["id"] for a in second["attempts"]] == [first["id"], second_id]
    assert api.job(first["id"])["attempts"] == second["attempts"]
    # The checkpoint directory is the first attempt's, on every replica of the second.
    first_run = str(work_dir / first["id"] / "output")
    for replica in second["cluster"]:
        assert replica["env"]["AIP_CHECKPOINT_DIR"] == f"{first_run}/checkpoints/"
    logs = [ln["message"] for ln in api.all_logs(second_id)]
    assert logs[-1] == f"resumed from {first['id']}", logs
    note = final_event(api, first["id"])["reason"]
    assert f"retried as job {second_id} (attempt 2 of 3) after 0 s" in note and "exit code 3" in note
    opening = api.events(second_id)[0]
    assert opening["to_state"] == "QUEUED" and opening["reason"].startswith(
        f"attempt 2 of 3, retry of {first['id']}")
    assert_no_processes(work_dir)


def test_a_fatal_exit_code_is_never_retried(make_client, work_dir):
    api = make_client()
    api.template("fatal", retrying(4, exit_codes=[3], fatal_exit_codes=[4]))
    job = api.submit("fatal")
    assert api.wait_state(job["id"], "FAILED", "SUCCEEDED")["state"] == "FAILED"
    note = final_event(api, job["id"])["reason"]
    assert "not retried: exit code 4 is fatal in the retry policy (attempt 1 of 3)" in note
    assert [a["attempt"] for a in attempts(api, job["id"])] == [1]
    assert api.job(job["id"])["retried_by"] is None


def test_an_exit_code_the_policy_does_not_name_is_not_retried(make_client, work_dir):
    api = make_client()
    api.template("unnamed", retrying(5))
    job = api.submit("unnamed")
    assert api.wait_state(job["id"], "FAILED", "SUCCEEDED")["state"] == "FAILED"
    assert "not retried: exit code 5 is not among the policy's exit_codes" in final_event(api, job["id"])["reason"]
    assert len(attempts(api, job["id"])) == 1


def test_max_attempts_is_respected(make_client, work_dir):
    api = make_client()
    api.template("always3", retrying(3, max_attempts=2))
    job = api.submit("always3")
    assert api.wait_state(job["id"], "FAILED", "SUCCEEDED")["state"] == "FAILED"
    second = wait_for(lambda: api.job(job["id"])["retried_by"], "the second attempt")
    assert api.wait_state(second, "FAILED", "SUCCEEDED")["state"] == "FAILED"
    assert "not retried: attempt 2 of 2 was the last" in final_event(api, second)["reason"]
    assert [(a["attempt"], a["state"]) for a in attempts(api, job["id"])] == [(1, "FAILED"), (2, "FAILED")]
    assert api.job(second)["retried_by"] is None
    assert_no_processes(work_dir)


def test_backoff_is_shown_while_waiting_and_honoured(make_client, work_dir):
    api = make_client()
    api.template("slow-retry", retrying(3, max_attempts=2, backoff={"initial_seconds": 2, "multiplier": 2,
                                                                     "max_seconds": 60}))
    job = api.submit("slow-retry")
    failed = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    second_id = wait_for(lambda: api.job(job["id"])["retried_by"], "the second attempt")
    waiting = api.job(second_id)
    not_before = datetime.fromisoformat(waiting["not_before"])
    assert not_before > datetime.fromisoformat(failed["ended_at"])
    if waiting["state"] == "QUEUED" and waiting["backend_ref"] is None:
        assert "waits for its retry backoff until" in waiting["waiting_reason"]
    assert "after 2 s" in final_event(api, job["id"])["reason"]
    launched = api.wait_state(second_id, "FAILED", "SUCCEEDED")
    left_queue = [e for e in api.events(second_id) if e["from_state"] == "QUEUED"][0]
    assert datetime.fromisoformat(left_queue["at"]) >= not_before
    assert launched["waiting_reason"] is None


def test_cancel_during_backoff_cancels_the_pending_attempt_and_nothing_follows(make_client, work_dir):
    api = make_client()
    api.template("long-backoff", retrying(3, backoff={"initial_seconds": 3600, "max_seconds": 3600}))
    job = api.submit("long-backoff")
    api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    second_id = wait_for(lambda: api.job(job["id"])["retried_by"], "the second attempt")
    assert "waits for its retry backoff" in api.job(second_id)["waiting_reason"]
    r = api.c.post(f"/v1/jobs/{second_id}/cancel")
    assert r.status_code == 202, r.text
    cancelled = api.wait_state(second_id, "CANCELLED", "FAILED", "SUCCEEDED")
    assert cancelled["state"] == "CANCELLED" and cancelled["backend_ref"] is None   # never launched
    assert [(a["attempt"], a["state"]) for a in attempts(api, job["id"])] == [(1, "FAILED"), (2, "CANCELLED")]
    assert not (work_dir / second_id).exists()


def test_a_killed_replica_is_retried_unless_signals_are_off(make_client, work_dir):
    api = make_client()
    for name, on_signal in (("sig-on", True), ("sig-off", False)):
        body = spec(["--sleep", "600"])
        body["retry"] = {"max_attempts": 2, "on_signal": on_signal, "backoff": {"initial_seconds": 3600,
                                                                                 "max_seconds": 3600}}
        api.template(name, body)
        job = api.submit(name)
        api.wait_state(job["id"], "RUNNING")
        run = work_dir / job["id"]
        started = run / "replicas" / "workerpool0-0.started"   # the wrapper writes the command's pid
        pid = wait_for(lambda: started.exists() and json.loads(started.read_text())["pid"], "the replica's pid")
        os.kill(pid, signal.SIGKILL)
        failed = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
        assert failed["error"]["signal"] == "SIGKILL"
        reason = final_event(api, job["id"])["reason"]
        if on_signal:
            assert "killed by SIGKILL: retried as job" in reason
            api.c.post(f"/v1/jobs/{api.job(job['id'])['retried_by']}/cancel")
        else:
            assert "not retried" in reason and "on_signal: false" in reason
            assert len(attempts(api, job["id"])) == 1

