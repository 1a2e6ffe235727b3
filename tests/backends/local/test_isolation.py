"""What a local replica can reach: its own environment and folder, nothing of the
service's (database file, /proc entries, other jobs), on both databases. Replica
output that is odd (NaN, Infinity, huge lines, invalid UTF-8) never wedges a job;
a silent or stopped replica fails the job after its stall timeout."""
from __future__ import annotations

import json
import os
import signal
import uuid

import pytest

from tests.backends.localkit import assert_no_processes, job_processes
from tests.conftest import ONE_DATABASE
from tests.waiting import wait_for

pytestmark = ONE_DATABASE

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="separate uids need the tests to run as root")

PROBE = r'''
import json, os, sys
out = {}
for name, path in zip(("database", "service_environ", "other_job"), sys.argv[1:]):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        out[name] = "read"
    except OSError as e:
        out[name] = type(e).__name__
out["uid"] = os.getuid()
out["env"] = sorted(os.environ)
print("PROBE " + json.dumps(out), flush=True)
'''


def probe_template(*paths: str) -> dict:
    return {"container": {"image_uri": "local", "command": ["python", "-c", PROBE, *paths]}}


def probe_result(api, job_id) -> dict:
    lines = [ln["message"] for ln in api.all_logs(job_id) if ln["message"].startswith("PROBE ")]
    assert lines, api.all_logs(job_id)
    return json.loads(lines[0][len("PROBE "):])


@ROOT_ONLY
def test_a_replica_cannot_read_the_database_the_service_or_another_job(make_client, work_dir, db_url):
    api = make_client()
    api.template("other", {"container": {"image_uri": "local", "command": ["python", "-c",
                                                                           "open('secret.txt','w').write('x')"]}})
    other = api.submit("other")
    assert api.wait_state(other["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    other_work = api.run_path(other["id"]) / "work"
    assert (other_work / "secret.txt").exists()

    db_file = db_url.removeprefix("sqlite:///") if db_url.startswith("sqlite") else "/etc/shadow"
    api.template("probe", probe_template(db_file, f"/proc/{os.getpid()}/environ", str(other_work)))
    job = api.submit("probe")
    assert api.wait_state(job["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    seen = probe_result(api, job["id"])
    # /etc/shadow is not even there (issue 33: a minimal /etc); the tests' SQLite file lies in a folder
    # shared with the jobs (TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS), so there it is its mode that refuses.
    assert seen["database"] == ("PermissionError" if db_url.startswith("sqlite") else "FileNotFoundError")
    assert seen["service_environ"] == "FileNotFoundError"  # its own PID namespace: no such process
    assert seen["other_job"] == "FileNotFoundError"  # of the run folders, its own only
    assert seen["uid"] != 0
    assert not [k for k in seen["env"] if k.startswith(("TRAINJOBS_", "PG", "GOOGLE_"))
                and k != "TRAINJOBS_LOCAL_REPLICA"]
    if db_url.startswith("sqlite"):
        assert oct(os.stat(db_file).st_mode & 0o777) == "0o600"


@ROOT_ONLY
def test_a_replica_cannot_forge_its_exit_record(make_client, work_dir):
    api = make_client()
    # It tries to write a success record for itself, then fails.
    code = ("import os, sys\n"
            "run = os.path.dirname(os.getcwd())\n"
            "try:\n"
            "    open(os.path.join(run, 'replicas', 'workerpool0-0.exit'), 'w').write('{\"exit_code\": 0}')\n"
            "    print('forged')\n"
            "except OSError as e:\n"
            "    print('refused', type(e).__name__)\n"
            "sys.exit(3)\n")
    api.template("forger", {"container": {"image_uri": "local", "command": ["python", "-c", code]}})
    job = api.submit("forger")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "FAILED" and done["error"]["exit_code"] == 3
    assert "refused PermissionError" in [ln["message"] for ln in api.all_logs(job["id"])]


@ROOT_ONLY
def test_the_sandbox_hides_other_processes_and_the_host_tmp(make_client, work_dir):
    api = make_client()  # the default as root: namespaces
    # A name of this run alone: a fixed one (/tmp/mine) failed when something else on the host had made it.
    mine = f"/tmp/trainjobs-sandbox-tmp-{uuid.uuid4().hex}"
    code = ("import os\n"
            "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "print('PIDS', len(pids), os.path.exists('/proc/%d' % int(os.environ['SERVICE_PID'])))\n"
            f"open({mine!r}, 'w').write('x')\n"
            "for path in ('/usr/trainjobs-sandbox-probe', '/var/lib/trainjobs-sandbox-probe'):\n"
            "    try:\n"
            "        open(path, 'w')\n"
            "    except OSError as e:\n"
            "        print('HOSTWRITE', type(e).__name__, e.errno)\n")
    api.template("boxed", {"container": {"image_uri": "local", "command": ["python", "-c", code],
                                         "env": {"SERVICE_PID": str(os.getpid())}}})
    job = api.submit("boxed")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    lines = [ln["message"] for ln in api.all_logs(job["id"])]
    [line] = [m for m in lines if m.startswith("PIDS")]
    _, count, sees_service = line.split()
    assert int(count) <= 3 and sees_service == "False"  # its own PID namespace: itself (and its init)
    assert not os.path.exists(mine)                      # its own /tmp
    assert "HOSTWRITE OSError 30" in lines               # EROFS: what is bound of the host is read-only
    assert "HOSTWRITE FileNotFoundError 2" in lines      # and the rest is not there (issue 33)


ODD = r'''
import json, sys
out = sys.stdout.buffer
out.write(b'{"event": "train_start", "epochs": 2}\n')
out.write(b'{"event": "epoch_end", "epoch": 1, "epochs": 2, "metrics": {"loss": NaN, "acc": Infinity}}\n')
out.write(b'{"event": "epoch_end", "epoch": 2, "epochs": 2, "metrics": {"loss": -Infinity, "note": "\\u0000\\ud800", "big": "' + b'y' * 60_000 + b'"}}\n')
out.write(b'{"event": "epoch_end", "epoch": 3, "junk": "' + b'x' * 1_000_000 + b'"}\n')
out.write(b'invalid utf-8: \xff\xfe\xc3\x28 end\n')
out.write(b'{"event": "train_end"}\n')
out.flush()
'''


def test_odd_replica_output_never_wedges_the_job(make_client, work_dir):
    api = make_client()
    api.template("odd", {"container": {"image_uri": "local", "command": ["python", "-c", ODD]}})
    job = api.submit("odd")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    progress = done["progress"]
    # Epoch 2 is kept, cleaned and cut to size; the 1 MB "epoch 3" line was split into
    # 64 KiB log records by the wrapper, so it is log text, not progress.
    assert progress["epoch"] == 2 and progress["phase"] == "finished"
    assert len(json.dumps(progress)) <= 16_384
    assert progress["metrics"] is None or progress["metrics"].get("loss") is None
    messages = [ln["message"] for ln in api.all_logs(job["id"])]
    assert sum(len(m) for m in messages if set(m) <= set('x"}')) >= 900_000
    assert any(m.startswith("invalid utf-8:") and m.endswith(" end") for m in messages)
    # Cancel still works on such a job's neighbours: nothing is stuck.
    assert api.c.get("/metrics").status_code == 200


def test_a_stopped_replica_fails_the_job_after_its_stall_timeout(make_client, work_dir):
    api = make_client()
    s = {"container": {"image_uri": "local", "command": [
        "python", "-c", "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.2)"]},
        "scheduling": {"stall_timeout_seconds": 3}}
    api.template("stalls", s)
    job = api.submit("stalls")
    api.wait_state(job["id"], "RUNNING")
    wait_for(lambda: any(ln["message"] == "tick" for ln in api.all_logs(job["id"])), "the first tick")
    still = api.job(job["id"])
    assert still["state"] == "RUNNING"  # ticking keeps it alive
    replica = [p for p in job_processes(work_dir, job["id"]) if "tick" in " ".join(p.cmdline())
               and "wrapper" not in " ".join(p.cmdline())]
    assert replica
    for p in replica:
        p.send_signal(signal.SIGSTOP)
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert done["state"] == "FAILED"
    assert done["error"]["replica"] == "workerpool0-0"
    assert "no output" in done["error"]["message"] and "stall_timeout_seconds" in done["error"]["message"]
    # Judged by the lifecycle (lifecycle/stalls.py), as for every backend: one code, one source.
    assert (done["error"]["code"], done["error"]["source"]) == (4, "trainjobs")
    for p in replica:
        try:
            p.send_signal(signal.SIGCONT)
        except Exception:  # noqa: BLE001 - already gone
            pass
    assert_no_processes(work_dir, job["id"])
