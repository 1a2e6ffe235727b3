"""Attack: code in a replica that looks for kernel surface and for where the service lives
(issue 48, point 4). It sets up an io_uring (a large kernel surface that container
runtimes' default seccomp filters refuse), and reads the sandbox init's command line
(/proc/1/cmdline: as started, the service's run folders, whose path names the database)
and every process /proc shows it. The job's filter refuses io_uring; its /proc shows only
its own processes."""
from __future__ import annotations

import errno
import json
import os

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes need the tests to run as root")

PROBE = r'''
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
params = ctypes.create_string_buffer(120)  # struct io_uring_params
for name, number, args in (("io_uring_setup", 425, (ctypes.c_uint(4), params)),
                           ("io_uring_enter", 426, (ctypes.c_int(-1), 0, 0, 0, None, 0)),
                           ("io_uring_register", 427, (ctypes.c_int(-1), 0, None, 0))):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(number), *args)
    out[name] = ["fd", r] if r >= 0 else ["errno", ctypes.get_errno()]
    if r >= 0:
        os.close(r)
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
out["me"] = os.getpid()
out["proc"] = {}
for path in ["/proc/1/cmdline", "/proc/1/environ", "/proc/1/mountinfo", "/proc/self/mountinfo",
             *[f"/proc/{p}/cmdline" for p in out["pids"]]]:
    try:
        with open(path, "rb") as f:
            out["proc"][path] = f.read().decode(errors="replace")
    except OSError as e:
        out["proc"][path] = type(e).__name__
print("PROBE " + json.dumps(out), flush=True)
'''


def test_a_replica_gets_no_io_uring_and_sees_no_process_but_its_own(make_client, work_dir, db_url):
    """About 4 s: one small job."""
    api = make_client()
    api.template("kernel", {"container": {"image_uri": "local", "command": ["python", "-c", PROBE]}})
    job = api.submit("kernel")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    [probe] = [json.loads(ln["message"][len("PROBE "):]) for ln in api.all_logs(job["id"])
               if ln["message"].startswith("PROBE ")]

    # io_uring: refused by the job's seccomp filter, all three calls (EPERM); never an fd.
    for call in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        assert probe[call] == ["errno", errno.EPERM], (call, probe[call])
    # /proc shows the job's own processes only: not the sandbox's init (PID 1, root), whose
    # command line names the service's run folders (with the default run folders, the database).
    assert 1 not in probe["pids"] and probe["me"] in probe["pids"], probe["pids"]
    for what in ("cmdline", "environ", "mountinfo"):
        assert probe["proc"][f"/proc/1/{what}"] == "FileNotFoundError", probe["proc"][f"/proc/1/{what}"]
    mounts = probe["proc"].pop("/proc/self/mountinfo")
    assert str(work_dir) not in json.dumps(probe["proc"]), probe["proc"]
    # Its mounts name the run folders only where it is given its own (at its host path, as in
    # HOME and AIP_*: docs/local.md) and where the others are covered; never the database file.
    own = api.run_path(job["id"])
    naming = [line.split()[4] for line in mounts.splitlines() if str(work_dir) in line]
    assert sorted(naming) == sorted([str(work_dir), str(own)]), mounts
    database = db_url.split("///", 1)[-1] if db_url.startswith("sqlite") else db_url.rsplit("/", 1)[-1]
    assert database not in mounts, mounts
