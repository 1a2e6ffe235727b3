"""Attack: a job leaves things in a shared folder (TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS, a 1777
dataset cache) for the next job given its uid (issue 48, point 2): a 0600 secret, a hard
link to it, a setuid file, a FIFO, a symlink, a 0777 folder with a 0600 file inside, a
file whose ACL names its own uid, a 0600 file at the bottom of 300 nested 0777 folders, and a
process left behind that goes on writing files there. The next job, of the same uid (a pool of one), tries to
read, overwrite and re-mode each. When a job ends, what its uid left in a shared folder is
the service's (set-id bits and ACLs removed, other permission bits kept): every try fails."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import uuid

import pytest

from service.backends.local import shared
from tests.backends.localkit import TESTS_TMP, read_json

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes need the tests to run as root")

LEAVE = r'''
import json, os, struct, sys, time
os.chdir(sys.argv[1])
os.umask(0)
# A process left behind (setsid, double fork) that goes on writing 0600 files of its uid here:
# it must be dead before the give-back, or what it writes after stays the uid's.
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        n = 0
        while True:
            n += 1
            os.write(fd := os.open(f"late-{n}", os.O_WRONLY | os.O_CREAT, 0o600), sys.argv[2].encode())
            os.close(fd)
            if n == 1:
                os.close(w)
            time.sleep(0.05)
    os._exit(0)
os.close(w)
os.wait()
os.read(r, 1)  # EOF once the left-behind process has written its first file
with open("secret", "w") as f:
    f.write(sys.argv[2])
os.chmod("secret", 0o600)
os.link("secret", "secret-link")
with open("suid", "w") as f:
    f.write("#!/bin/sh\nid -u\n")
os.chmod("suid", 0o4755)
os.mkfifo("fifo", 0o600)
os.symlink("secret", "symlink")
os.mkdir("open", 0o777)
with open("open/mine", "w") as f:
    f.write(sys.argv[2])
os.chmod("open/mine", 0o600)
with open("acl", "w") as f:
    f.write(sys.argv[2])
os.chmod("acl", 0o600)
# POSIX ACL v2: user::rw-, user:<me>:rw-, group::---, mask::rw-, other::---
entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 6, os.getuid()), (0x04, 0, 0xFFFFFFFF), (0x10, 6, 0xFFFFFFFF),
           (0x20, 0, 0xFFFFFFFF)]
try:
    os.setxattr("acl", "system.posix_acl_access", struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))
    acl = "set"
except OSError as e:
    acl = e.strerror
# Deeper than the give-back walk goes (300 folders, 0777), a 0600 file of its uid at the bottom.
os.mkdir("deep", 0o777)
os.chdir("deep")
for _ in range(300):
    os.mkdir("d", 0o777)
    os.chdir("d")
with open("secret", "w") as f:
    f.write(sys.argv[2])
os.chmod("secret", 0o600)
print("LEFT " + json.dumps({"acl": acl, "uid": os.getuid()}), flush=True)
'''

TAKE = r'''
import json, os, sys
os.chdir(sys.argv[1])
out = {}
last = "late-%d" % max(int(n[len("late-"):]) for n in os.listdir(".") if n.startswith("late-"))
for name in ("secret", "secret-link", "open/mine", "acl", "symlink", "deep/" + "d/" * 300 + "secret", last):
    try:
        with open(name) as f:
            out[f"read {name}"] = f.read()
    except OSError as e:
        out[f"read {name}"] = type(e).__name__
for name in ("secret", "acl"):
    try:
        with open(name, "w") as f:
            f.write("overwritten")
        out[f"write {name}"] = "written"
    except OSError as e:
        out[f"write {name}"] = type(e).__name__
for name in ("secret", "suid", "open", "fifo"):
    try:
        os.chmod(name, 0o777)
        out[f"chmod {name}"] = "changed"
    except OSError as e:
        out[f"chmod {name}"] = type(e).__name__
try:
    os.close(os.open("fifo", os.O_WRONLY | os.O_NONBLOCK))
    out["open fifo"] = "opened"
except OSError as e:
    out["open fifo"] = type(e).__name__
with open("open/published", "w") as f:  # the 0777 folder the first job published: still everyone's
    f.write("hello")
out["uid"] = os.getuid()
print("TOOK " + json.dumps(out), flush=True)
'''


def _line(api, job_id: str, word: str) -> dict:
    [found] = [json.loads(ln["message"][len(word) + 1:]) for ln in api.all_logs(job_id)
               if ln["message"].startswith(word + " ")]
    return found


# On SQLite only: the attack is between two sandboxes and the host's folder; the database only
# queues the two jobs, as every other local test does on both (about 7 s saved a run).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_nothing_a_job_leaves_in_a_shared_folder_is_the_next_job_of_its_uids(make_client, tmp_path):
    """About 8 s: two jobs, one after the other, given the same uid (one uid to give)."""
    cache = tmp_path / "cache"   # the operator's dataset cache: 1777, like /tmp
    cache.mkdir()
    os.chmod(cache, 0o1777)
    # A uid no other test of this worker hands out (the last of its range): a sandbox's init from
    # an earlier test may hold its uid's lock until it notices its run folder is gone.
    last = int(os.environ.get("TRAINJOBS_LOCAL_REPLICA_UID_BASE", "200000")) + 999
    api = make_client(local_replica_uid_base=last, local_replica_uid_count=1,
                      local_sandbox_shared_dirs=[str(TESTS_TMP), str(cache)])
    secret = uuid.uuid4().hex
    runs = []
    for name, program in (("leave", LEAVE), ("take", TAKE)):
        api.template(name, {"container": {"image_uri": "local",
                                          "command": ["python", "-c", program, str(cache), secret]}})
        job = api.submit(name)
        done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
        assert done["state"] == "SUCCEEDED", done["error"]
        runs.append(job["id"])
    left, took = _line(api, runs[0], "LEFT"), _line(api, runs[1], "TOOK")
    uids = [read_json(api.run_path(j) / "state.json")["uid"] for j in runs]
    assert uids[0] == uids[1] == left["uid"] == took["uid"] == last
    assert left["acl"] == "set", left  # the file system keeps ACLs: the attack is real

    # The next job of the same uid reads, overwrites and re-modes nothing the first one left.
    assert {k: v for k, v in took.items() if k != "uid" and v != "PermissionError"} == {}, took
    assert (cache / "secret").read_text() == secret
    # On the host every entry either job left is the service's; set-id bits and ACLs are gone;
    # what the first job published (its 0777 folder) stays published.
    me = (os.geteuid(), os.getegid())
    closed = cache / "deep" / "/".join(["d"] * shared.MAX_DEPTH)  # the first folder the walk did not enter
    assert (os.lstat(closed).st_uid, stat.S_IMODE(os.lstat(closed).st_mode)) == (me[0], 0o700)
    for path in [p for p in cache.rglob("*") if not p.is_relative_to(closed)]:
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid) == me, (path, st.st_uid, st.st_gid)
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), (path, oct(st.st_mode))
        if not path.is_symlink():
            assert "system.posix_acl_access" not in os.listxattr(path), path
    assert stat.S_IMODE(os.lstat(cache / "open").st_mode) == 0o777
    assert (cache / "open" / "published").read_text() == "hello"
    assert stat.S_ISFIFO(os.lstat(cache / "fifo").st_mode)


def test_what_cannot_be_given_back_is_named(tmp_path):
    """The walk itself (no job): an entry root cannot change (immutable) is named, the rest given
    back, another owner's entries left as they are."""
    uid = 300_930 + os.getpid() % 30  # this engineer's range, apart from the jobs' uids
    folder = tmp_path / "shared"
    (folder / "sub").mkdir(parents=True)
    for name in ("mine", "stuck", "sub/deeper"):
        (folder / name).write_text("x")
        os.chown(folder / name, uid, uid)
    (folder / "theirs").write_text("x")
    os.chown(folder / "theirs", uid + 1, uid + 1)
    subprocess.run(["chattr", "+i", str(folder / "stuck")], check=True)
    try:
        failed = shared.give_back([folder], uid)
        owners = {name: os.lstat(folder / name).st_uid for name in ("mine", "stuck", "sub/deeper", "theirs")}
    finally:
        subprocess.run(["chattr", "-i", str(folder / "stuck")], check=True)
    assert failed == [f"{folder}/stuck: Operation not permitted"]
    assert owners == {"mine": os.geteuid(), "stuck": uid, "sub/deeper": os.geteuid(), "theirs": uid + 1}
