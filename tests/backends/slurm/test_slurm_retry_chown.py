"""Attack (issue 33, hole 4): a retry hands its first attempt's output/ to the job user, as
root. A task of the first attempt, still running in Slurm as the job user, swaps a folder of
that output for a symlink to a root-owned folder in a tight loop while the service prepares
retries. The walk (service.backends.owned_tree) goes by descriptor and never follows the
link: every file outside the run folder keeps its owner, mode and content. The old walk by
path (os.walk + lchown) handed the root-owned 0600 file to the job user within a few rounds."""
from __future__ import annotations

import dataclasses
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from service import jobspec
from service.backends.slurm import SlurmBackend
from service.backends.slurm.entry import slurm_config_of
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState
from service.persistence.models import utcnow
from tests.backends.slurm.conftest import JOB_USER, slurm_settings, spec
from tests.waiting import wait_for

SWAPPER = Path(__file__).parent / "programs" / "swapper.py"
ROUNDS = 400
ROUND_SECONDS = 30.0


def _snapshot(top) -> dict:
    out = {}
    for root, dirs, files in os.walk(top):
        for name in [*dirs, *files, ""]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            data = open(path, "rb").read() if os.path.isfile(path) and not os.path.islink(path) else None
            out[path] = (st.st_uid, st.st_gid, st.st_mode, data)
    return out


def test_a_swapping_task_never_makes_a_retry_chown_a_host_file(cluster, slurm_work_dir, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only a root service hands folders to the job user")
    # No service runs: the settings only need some database URL.
    db_url = f"sqlite:///{tmp_path}/unused.db"
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    backend.start_client()
    assert backend.identity is not None
    outside = tmp_path / "outside"            # root's: must never change
    (outside / "deep").mkdir(parents=True)
    (outside / "secret").write_text("root only")
    os.chmod(outside / "secret", 0o600)
    (outside / "deep" / "config").write_text("also root's")
    os.chmod(outside, 0o755)
    before = _snapshot(outside)

    _, compiled = jobspec.build(spec(["--lines", "1"]), [], {}, None, display_name="t", labels={})
    first = JobHandle(uuid.uuid4(), JobState.QUEUED, None, compiled, utcnow())
    backend._prepare(first, backend.run_of(first.id))
    output = backend.run_of(first.id).output  # the first attempt's, with checkpoints
    ckpt = output / "checkpoints"
    (ckpt / "deep").mkdir(parents=True)
    (ckpt / "ckpt-1.index").write_text("weights")
    (ckpt / "deep" / "config").write_text("job's")
    os.symlink(outside, output / "bait")
    retry = JobHandle(uuid.uuid4(), JobState.QUEUED, None,
                      dataclasses.replace(compiled, output_of=str(first.id)), utcnow())
    backend._prepare(retry, backend.run_of(retry.id))   # hands the checkpoints to the job user

    talk = tmp_path / "swapper"
    talk.mkdir()
    os.chmod(talk, 0o777)
    stop, ready, result = talk / "stop", talk / "ready", talk / "result"
    # The first attempt's task, still running on a node as the job user.
    cluster.run("sbatch", "--parsable", f"--uid={JOB_USER}", f"--gid={backend.identity[1]}", "--chdir=/tmp",
                f"--output={talk}/slurm.out", "--wrap",
                f"{sys.executable} -I -S {SWAPPER} {ckpt} {output / 'bait'} {stop} {ready} {result}")
    wait_for(ready.exists, "the swapper task to start")
    try:
        deadline = time.monotonic() + ROUND_SECONDS
        rounds, failed = 0, []
        while rounds < ROUNDS and time.monotonic() < deadline:
            try:
                backend._prepare(retry, backend.run_of(retry.id))   # each retry's hand-over
            except OSError as e:   # (a walk by path trips over the swaps too; checked below)
                failed.append(repr(e))
            rounds += 1
    finally:
        stop.touch()
        wait_for(result.exists, "the swapper to report")
    swaps, _tries = map(int, result.read_text().split())
    assert rounds >= 50, f"only {rounds} rounds in the time allowed"
    assert swaps > rounds, f"the swapper made only {swaps} swaps: the race was not exercised"
    assert _snapshot(outside) == before      # owner, mode and content of everything outside
    assert not failed, failed[:3]            # and no hand-over tripped over the swaps
    # What the walk may change, it did: the job user owns its checkpoints (whichever name they have now).
    real = ckpt if not ckpt.is_symlink() else output / "bait"
    assert os.lstat(real / "ckpt-1.index").st_uid == backend.identity[0]
