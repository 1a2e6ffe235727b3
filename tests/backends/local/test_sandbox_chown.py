"""Attack: a process left over from a job (possible without the sandbox; with it the
job's namespace is dead before any of this runs) swaps a folder of its output with
a symlink to a root-owned folder, with renameat2(RENAME_EXCHANGE) in a tight loop,
while root hands the folder to a retry's uid (own_tree) and takes it back at the
job's end (reclaim). Thousands of rounds: nothing outside the run folder changes
owner, mode or content."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from service.backends.local import isolation

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown attacks need the tests to run as root")

SWAPPER = r'''
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, stop = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3]
swaps = tries = 0
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    tries += 1
    if libc.renameat2(-100, a, -100, b, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        swaps += 1
    if tries % 500 == 0 and os.path.exists(stop):
        break
print(swaps, tries, flush=True)
'''

ROUNDS = 2000


def _snapshot(top) -> dict:
    out = {}
    for root, dirs, files in os.walk(top):
        for name in [*dirs, *files, ""]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            data = open(path, "rb").read() if os.path.isfile(path) and not os.path.islink(path) else None
            out[path] = (st.st_uid, st.st_gid, st.st_mode, data)
    return out


def test_a_symlink_swapping_leftover_never_moves_root_outside_the_run_folder(tmp_path):
    uid = 300_960 + os.getpid() % 30  # this engineer's range, apart from the jobs' uids
    outside = tmp_path / "outside"            # root's: must never change
    (outside / "deep").mkdir(parents=True)
    (outside / "secret").write_text("root only")
    os.chmod(outside / "secret", 0o600)
    (outside / "deep" / "config").write_text("also root's")
    os.chmod(outside, 0o755)
    before = _snapshot(outside)

    output = tmp_path / "run" / "output"      # a job's output folder, with checkpoints
    ckpt = output / "checkpoints"
    (ckpt / "deep").mkdir(parents=True)
    (ckpt / "ckpt-1.index").write_text("weights")
    (ckpt / "deep" / "config").write_text("job's")
    os.symlink(outside, output / "bait")
    os.chmod(tmp_path, 0o711)
    os.chmod(tmp_path / "run", 0o711)
    isolation.own_tree(output, uid)

    stop = tmp_path / "stop"
    swapper = subprocess.Popen([sys.executable, "-I", "-S", "-c", SWAPPER, str(ckpt), str(output / "bait"),
                                str(stop)], user=uid, group=uid, extra_groups=[], env={}, stdout=subprocess.PIPE,
                               text=True)
    try:
        deadline = time.monotonic() + 60
        rounds = 0
        while rounds < ROUNDS and time.monotonic() < deadline:
            isolation.own_tree(output, uid)       # a retry's launch
            isolation.reclaim([output])           # that attempt's end
            isolation.own_tree(output, uid)       # the swapper may run again
            rounds += 1
    finally:
        stop.touch()
        swaps, tries = map(int, swapper.communicate(timeout=60)[0].split())
    assert rounds >= 300, f"only {rounds} rounds in the time allowed"
    assert swaps > rounds, f"the swapper made only {swaps} swaps: the race was not exercised"
    assert _snapshot(outside) == before      # owner, mode and content of everything outside
    isolation.reclaim([output])
    for path, (u, _g, _m, _d) in _snapshot(output).items():
        assert u == 0 or os.path.islink(path), path  # and the run folder itself is root's again
