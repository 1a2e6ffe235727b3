"""Issue 35, point 2: a backend written only in the test tree (tests/backends/fourth/),
registered through the public registry, runs jobs through the whole lifecycle with no file of
service/ changed for it: submit, RUNNING, logs, cancel, a stall (judged by the lifecycle), a
retry that resumes from its first attempt's checkpoints, and a controller restart that adopts
a running job."""
from __future__ import annotations

import textwrap

import pytest

from service.backends import registry
from service.slices import Settings
from tests.backends.fourth.entry import entry
from tests.backends.localkit import PROGRAM, Api
from tests.waiting import wait_for

# Resumes if its checkpoint is there (a retry attempt), else writes it and fails with 3.
RESUMING = textwrap.dedent("""
    import os, pathlib
    ckpt = pathlib.Path(os.environ["AIP_CHECKPOINT_DIR"]) / "epoch-1"
    if ckpt.exists():
        print("resumed from", ckpt.name, flush=True)
    else:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpt.write_text("1")
        print("saved", ckpt.name, "then crashed", flush=True)
        raise SystemExit(3)
""")


@pytest.fixture
def fourth(tmp_path):
    """The fourth backend, registered for this test: its one line (registry.register)."""
    registry.register(entry(tmp_path / "fourth-runs"))
    yield
    registry.unregister("fourth")


@pytest.fixture
def start(fourth, api_client, db_url, token):
    settings = Settings(database_url=db_url, backends=["fourth"], default_backend="fourth",
                        reconcile_interval_seconds=0.2, seed_demo_template=False)

    def started():
        return api_client(settings, token)
    return started


def _template(api: Api, name: str, args: list[str], **spec) -> None:
    api.template(name, {"container": {"image_uri": "fourth:1", "command": ["python"]},
                        "chief": {"container": {"args": args}}, **spec})


def _submit(api: Api, template: str) -> dict:
    r = api.c.post("/v1/jobs", json={"template": template})
    assert r.status_code == 201, r.text
    assert r.json()["backend"] == "fourth"
    return r.json()


def test_a_backend_from_the_tests_runs_jobs_through_the_lifecycle(start, tmp_path):
    api = Api(start())
    gate = tmp_path / "gate"
    _template(api, "talker", [str(PROGRAM), "--lines", "3", "--wait-file", str(gate)])
    job = _submit(api, "talker")
    assert api.wait_state(job["id"], "RUNNING")["cost"]["estimate_of"].startswith("Vertex AI in ")
    messages = wait_for(lambda: (m := [line["message"] for line in api.all_logs(job["id"])]) and len(m) == 4 and m,
                        "the replica's four lines in the job's logs")
    assert messages[0].startswith("hello from") and [m.split()[-2:] for m in messages[1:]] == \
        [["line", "0"], ["line", "1"], ["line", "2"]]

    assert api.c.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
    assert api.wait_state(job["id"], "CANCELLED", "FAILED", "SUCCEEDED")["state"] == "CANCELLED"

    _template(api, "silent", [str(PROGRAM), "--wait-file", str(gate)], scheduling={"stall_timeout_seconds": 2})
    silent = _submit(api, "silent")
    failed = api.wait_state(silent["id"], "FAILED", "SUCCEEDED", "CANCELLED")
    assert failed["state"] == "FAILED" and failed["error"]["replica"] == "workerpool0-0"
    assert (failed["error"]["code"], failed["error"]["source"]) == (4, "trainjobs")   # the lifecycle's judgement

    _template(api, "resuming", ["-c", RESUMING],
              retry={"max_attempts": 2, "exit_codes": [3], "backoff": {"initial_seconds": 0}})
    first = _submit(api, "resuming")
    assert api.wait_state(first["id"], "FAILED")["error"]["exit_code"] == 3
    second_id = wait_for(lambda: api.job(first["id"]).get("retried_by"), "the second attempt")
    assert api.wait_state(second_id, "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    assert [line["message"] for line in api.all_logs(second_id)] == ["resumed from epoch-1"]


def test_a_restarted_controller_adopts_the_backends_running_job(start, tmp_path):
    gate = tmp_path / "gate"
    first = start()
    api = Api(first)
    _template(api, "waiter", [str(PROGRAM), "--wait-file", str(gate), "--message", "done"])
    job = _submit(api, "waiter")
    api.wait_state(job["id"], "RUNNING")
    first.__exit__(None, None, None)   # the service stops; the job's process goes on

    api = Api(start())
    assert api.job(job["id"])["state"] == "RUNNING"
    gate.touch()
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    assert [line["message"] for line in api.all_logs(job["id"])][-1] == "done"
