"""Attack: a team admin who wants the host. An earlier job of the team compiles a
shared library into a folder it can write; an admin template then points every
loader variable (LD_PRELOAD, LD_LIBRARY_PATH, GCONV_PATH, GLIBC_TUNABLES, MALLOC_*)
at it. The library's constructor records the uid of every process that loads it.
No root process may ever load it (the wrappers and the sandbox's init run with a
fixed environment); the replica itself must load it, as its job's uid, or the test
proves nothing. With the sandbox (default) and explicitly without it."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.backends.localkit import assert_no_processes, read_json
from tests.conftest import ONE_DATABASE

pytestmark = [
    ONE_DATABASE,
    pytest.mark.skipif(os.geteuid() != 0, reason="root-side helpers exist only when the tests run as root"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="the attack compiles a library with gcc"),
]

EVIL_C = r'''
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void record(void) {
    char line[128];
    int fd = open(RECORD, O_WRONLY | O_APPEND | O_CREAT, 0666);
    if (fd < 0) return;
    int n = snprintf(line, sizeof line, "uid=%d euid=%d pid=%d\n", (int)getuid(), (int)geteuid(), (int)getpid());
    write(fd, line, n);
    close(fd);
}
'''

BUILD = r'''
import os, subprocess, sys
lib, src = sys.argv[1], os.path.join(os.environ["TMPDIR"], "evil.c")
open(src, "w").write(sys.argv[2])
subprocess.run(["gcc", "-shared", "-fPIC", f"-DRECORD=\"{sys.argv[3]}\"", "-o", os.path.join(lib, "evil.so"), src],
               check=True)
os.chmod(os.path.join(lib, "evil.so"), 0o755)
open(os.path.join(lib, "gconv-modules"), "w").write("module INTERNAL EVIL// evil 1\n")
os.chmod(os.path.join(lib, "gconv-modules"), 0o644)
print("built")
'''


@pytest.mark.parametrize("sandbox", ["namespaces", "none"])
def test_a_template_env_never_reaches_a_root_process(make_client, work_dir, tmp_path, sandbox):
    api = make_client(local_sandbox=sandbox)
    lib = tmp_path / "lib"      # a folder jobs of the team may write (a shared cache, say)
    lib.mkdir()
    os.chmod(lib, 0o777)
    record = tmp_path / "loaded-by"
    record.touch()
    os.chmod(record, 0o666)

    api.template("builder", {"container": {"image_uri": "local", "command": [
        "python", "-c", BUILD, str(lib), EVIL_C, str(record)]}})
    built = api.submit("builder")
    done = api.wait_state(built["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    assert (lib / "evil.so").exists()

    so = str(lib / "evil.so")
    api.template("evil", {"container": {
        "image_uri": "local", "command": ["python", "-c", "print('replica ran')"],
        "env": {"LD_PRELOAD": so, "LD_LIBRARY_PATH": str(lib), "GCONV_PATH": str(lib),
                "GLIBC_TUNABLES": "glibc.malloc.check=3", "MALLOC_CHECK_": "3", "MALLOC_PERTURB_": "85",
                "LD_AUDIT": so}},
        "chief": {}, "workers": {"replica_count": 1}})
    job = api.submit("evil")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    assert_no_processes(work_dir, job["id"])

    job_uid = read_json(api.run_path(job["id"]) / "state.json")["uid"]
    loads = [dict(kv.split("=") for kv in line.split()) for line in record.read_text().splitlines()]
    assert loads, "the injected library never ran: the test would prove nothing"
    assert all(int(r["uid"]) != 0 and int(r["euid"]) != 0 for r in loads), loads
    assert {int(r["uid"]) for r in loads} == {job_uid}  # the replicas, and only as their job's uid
    assert len(loads) >= 2  # chief and worker both loaded it (each a process of the job)
