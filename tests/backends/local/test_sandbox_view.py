"""Attack: code in a replica that looks around the host for a way out (issue 33). It
connects to every Unix socket the host has (PostgreSQL's and MySQL's among them: a
socket file is reachable through a read-only mount), lists and reads another job's
run folder and cgroup, the host's /run, /var/lib, /home and /root, keeps a secret in its
uid's kernel keyring for the next job of the same uid, and makes a user namespace of
its own (`unshare -Ur`). Its mount namespace starts from nothing and holds only what a
replica needs, and its seccomp filter refuses user namespaces and keyrings: each fails."""
from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.backends.localkit import read_json
from tests.conftest import ONE_DATABASE
from tests.waiting import wait_for

pytestmark = [ONE_DATABASE, pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes need the tests to run as root")]

PROBE = r'''
import ctypes, json, os, socket, subprocess, sys
args = json.loads(sys.argv[1])
out = {"sockets": {}, "seen": {}}
for path in args["sockets"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path)
        out["sockets"][path] = "connected"
    except OSError as e:
        out["sockets"][path] = type(e).__name__
    finally:
        s.close()
for path in args["look"]:
    try:
        out["seen"][path] = sorted(os.listdir(path))
    except OSError as e:
        out["seen"][path] = type(e).__name__
try:
    with open(args["other_state"]) as f:
        out["other_state"] = f.read()
except OSError as e:
    out["other_state"] = type(e).__name__
libc = ctypes.CDLL(None, use_errno=True)
out["unshare_call"] = libc.unshare(0x10000000) == 0 or os.strerror(ctypes.get_errno())
r = subprocess.run(["unshare", "-Ur", "id", "-u"], capture_output=True, text=True)
out["unshare_cmd"] = r.stdout.strip() if r.returncode == 0 else r.stderr.strip()
import pwd
out["me"] = pwd.getpwuid(os.getuid()).pw_name
print("PROBE " + json.dumps(out), flush=True)
'''


def _host_unix_sockets() -> list[str]:
    """Every Unix socket bound to a path on this host (its network namespace's /proc/net/unix)."""
    paths = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            fields = line.split()
            if len(fields) >= 8 and fields[7].startswith("/"):
                paths.add(fields[7])
    return sorted(p for p in paths if os.path.exists(p))


def _probe_lines(api, job_id: str) -> dict:
    lines = [ln["message"] for ln in api.all_logs(job_id)]
    [probe] = [json.loads(m[len("PROBE "):]) for m in lines if m.startswith("PROBE ")]
    return probe


def test_a_replica_sees_no_host_socket_no_other_job_and_no_user_namespace(make_client, work_dir):
    """About 8 s: two small jobs."""
    api = make_client()
    api.template("other", {"container": {"image_uri": "local", "command": [
        "python", "-c", "import time; print('RUNNING', flush=True); time.sleep(600)"],
        "args": ["--db-password=hunter2"]}})
    other = api.submit("other")
    wait_for(lambda: any(ln["message"] == "RUNNING" for ln in api.all_logs(other["id"])), "the other job")
    other_run = api.run_path(other["id"])
    other_cgroup = read_json(other_run / "state.json")["cgroup"]
    sockets = _host_unix_sockets()
    look = [str(other_run), str(other_run / "logs"), str(work_dir), "/run", "/var/run", "/var/lib", "/home",
            "/root", "/sys/fs/cgroup", "/sys/fs/cgroup/pids/trainjobs"] + ([other_cgroup] if other_cgroup else [])
    api.template("probe", {"container": {"image_uri": "local", "command": [
        "python", "-c", PROBE, json.dumps({"sockets": sockets, "look": look,
                                           "other_state": str(other_run / "state.json")})]}})
    job = api.submit("probe")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    probe = _probe_lines(api, job["id"])

    # Every socket of the host was tried, the database's among them; none exists inside.
    pg = [p for p in sockets if p.endswith(".s.PGSQL.5432")]
    assert pg, f"the test needs PostgreSQL's Unix socket on this host: {sockets}"
    assert set(probe["sockets"]) == set(sockets)
    assert {p: r for p, r in probe["sockets"].items() if r != "FileNotFoundError"} == {}
    # No other job's folder, state (its command line) or cgroup; none of the host's /run, /var/lib, /home, /root.
    assert probe["other_state"] == "FileNotFoundError"
    assert probe["seen"].pop(str(work_dir)) == [job["id"]]  # the run folders: its own only
    assert {p: r for p, r in probe["seen"].items() if r not in ("FileNotFoundError", [])} == {}, probe["seen"]
    # No user namespace of its own, by the system call or the tool.
    assert probe["unshare_call"] == "Operation not permitted"
    assert "Operation not permitted" in probe["unshare_cmd"], probe["unshare_cmd"]
    assert probe["me"] == "trainjob"  # its own uid has a name (getpwuid works)
    # ...and seen from the host, the other job's command line is the service's alone.
    assert os.stat(other_run / "state.json").st_mode & 0o077 == 0
    api.c.post(f"/v1/jobs/{other['id']}/cancel")
    api.wait_state(other["id"], "CANCELLED", "FAILED")


KEYRING = r'''
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEY_SPEC_USER_KEYRING, KEYCTL_SEARCH, KEYCTL_READ = -4, 10, 11
mode, secret = sys.argv[1], sys.argv[2].encode()
if mode == "write":
    key = libc.syscall(248, b"user", b"trainjobs-test", secret, len(secret), KEY_SPEC_USER_KEYRING)  # add_key
    print("WROTE", key if key >= 0 else ctypes.get_errno(), flush=True)
else:
    key = libc.syscall(250, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", b"trainjobs-test", 0)  # keyctl
    buf = ctypes.create_string_buffer(200)
    n = libc.syscall(250, KEYCTL_READ, key, buf, 200) if key >= 0 else -1
    print("READ", buf.raw[:n].decode() if n > 0 else "nothing", flush=True)
'''


def test_nothing_of_a_job_stays_in_its_uids_keyring_for_the_next_job(make_client):
    """About 6 s: two jobs, one after the other, given the same uid (one uid to give)."""
    # A uid no other test of this worker hands out (the last of its range): a sandbox's init from
    # an earlier test may hold its uid's lock until it notices its run folder is gone.
    last = int(os.environ.get("TRAINJOBS_LOCAL_REPLICA_UID_BASE", "200000")) + 999
    api = make_client(local_replica_uid_base=last, local_replica_uid_count=1)
    secret = uuid.uuid4().hex
    uids, lines = [], []
    for mode in ("write", "read"):
        api.template(f"keys-{mode}", {"container": {"image_uri": "local",
                                                    "command": ["python", "-c", KEYRING, mode, secret]}})
        job = api.submit(f"keys-{mode}")
        done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
        assert done["state"] == "SUCCEEDED", done["error"]
        uids.append(read_json(api.run_path(job["id"]) / "state.json")["uid"])
        lines += [ln["message"] for ln in api.all_logs(job["id"])]
    assert uids[0] == uids[1]
    assert "WROTE 1" in lines, lines  # add_key refused (EPERM): the kernel keyrings are not the job's
    assert "READ nothing" in lines, lines
