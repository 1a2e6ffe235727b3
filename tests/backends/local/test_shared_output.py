"""The operator's shared output folder (TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR, issue 52.5): every local
job's output is <folder>/<first attempt's id>, the job's alone.

Attack: a replica of job B, sandboxed or only under a uid of its own, tries to list, read and
write job A's folder there while A runs, and to list the shared folder itself: each is refused
(the sandbox covers the shared folder and binds in the job's own folder alone; without it, A's
folder is 0700 and A's uid's, the shared folder 0711 and the service's). Where the output goes is
the operator's: the template's base_output_directory does not move it, and a first attempt's id
that is not a UUID ('../x') is refused, never joined to a path."""
from __future__ import annotations

import dataclasses
import json
import os
import stat
import uuid
from pathlib import Path

import pytest

from service import jobspec
from service.backends.local.launcher import Launcher
from service.backends.local.rundir import RunDir
from service.backends.owned_tree import shared_job_folder
from tests.backends.localkit import spec
from tests.conftest import ONE_DATABASE
from tests.waiting import wait_for

pytestmark = [ONE_DATABASE, pytest.mark.skipif(os.geteuid() != 0, reason="replica uids need the tests to run as root")]

RESUMABLE = Path(__file__).parents[1] / "programs" / "resumable.py"


def _messages(api, job_id: str) -> list[str]:
    return [line["message"] for line in api.all_logs(job_id)]


@pytest.mark.parametrize("sandbox", ["namespaces", "none"])
def test_a_replica_cannot_reach_another_jobs_folder_in_the_shared_output(make_client, tmp_path, sandbox):
    shared = tmp_path / "shared"
    api = make_client(local_shared_output_dir=str(shared), local_sandbox=sandbox, local_max_running_jobs=2)
    api.template("keeps", spec([], command=["python", str(RESUMABLE)]))   # base_output: gs://trainjobs-test/run
    a = api.submit("keeps")["id"]
    api.wait_state(a, "RUNNING")
    saved = shared / a / "checkpoints" / "checkpoint.json"
    wait_for(saved.exists, "job A's checkpoint in the shared folder")
    a_uid = json.loads(saved.read_text())["uid"]
    assert a_uid >= 200_000                                  # the job's own uid, not root
    folder = os.stat(shared / a)
    assert (folder.st_uid, stat.S_IMODE(folder.st_mode)) == (a_uid, 0o700)
    root = os.stat(shared)
    assert (root.st_uid, stat.S_IMODE(root.st_mode)) == (0, 0o711)

    api.template("peeks", spec(["--peek", str(shared / a)], command=["python", str(RESUMABLE)]))
    b = api.submit("peeks")["id"]
    api.wait_state(b, "SUCCEEDED")
    said = _messages(api, b)
    for what in ("list", "read", "write"):
        assert any(m.startswith(f"peek {what}: refused") for m in said), said
    seen = next(m for m in said if m.startswith("peek root: "))
    assert a not in seen, seen     # the sandbox shows its own folder at most; without it, 0711: refused
    assert not (shared / a / "FORGED").exists()
    assert saved.exists() and json.loads(saved.read_text())["uid"] == a_uid
    assert api.c.post(f"/v1/jobs/{a}/cancel").status_code in (200, 202)
    api.wait_state(a, "CANCELLED")
    # Its attempt over, the folder is the service's again (a later job of the same uid reads nothing).
    wait_for(lambda: os.stat(shared / a).st_uid == 0, "job A's folder given back to the service")


def test_the_shared_output_folder_is_named_by_a_uuid_only(tmp_path):
    root = tmp_path / "shared"
    job = uuid.uuid4()
    assert shared_job_folder(root, job) == root / str(job)
    for hostile in ("../etc", "/etc", f"{job}/../../etc", ""):
        with pytest.raises(ValueError):
            shared_job_folder(root, hostile)


def test_a_retry_of_a_hostile_first_attempt_id_is_refused(tmp_path):
    """output_of is written by the service (lifecycle/retries.py); a row altered to a path is refused."""
    launcher = _launcher(tmp_path, tmp_path / "s")
    _, compiled = jobspec.build(spec(["--lines", "1"]), [], {}, None, display_name="t", labels={})
    job = uuid.uuid4()
    assert launcher.output_dir(RunDir.of(tmp_path / "runs", job), compiled, job) == (tmp_path / "s" / str(job)).resolve()
    hostile = dataclasses.replace(compiled, output_of="../../etc")
    with pytest.raises(ValueError):
        launcher.output_dir(RunDir.of(tmp_path / "runs", job), hostile, job)


def _launcher(tmp_path, shared: Path):
    from service.backends.local.entry import local_settings_of
    from tests.backends.localkit import settings_for

    settings = settings_for(f"sqlite:///{tmp_path}/unused.db", tmp_path / "runs", local_shared_output_dir=str(shared),
                            local_sandbox="none")
    return Launcher(local_settings_of(settings))


def test_a_shared_folder_that_is_not_the_services_stops_the_start(tmp_path):
    """Made beforehand by someone else (a replica's uid, say), its owner could change what it holds."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    with pytest.raises(ValueError, match="is not this service's user's"):
        _launcher(tmp_path, shared).prepare()
    os.chown(shared, 0, 0)
    os.chmod(shared, 0o777)
    _launcher(tmp_path, shared).prepare()
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o711          # closed to listing and writing


def test_a_shared_folder_replicas_cannot_reach_stops_the_start_naming_it(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    os.chmod(closed, 0o700)
    with pytest.raises(ValueError, match=r"cannot reach TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR=.*closed/shared: .*closed "
                                         r"is not searchable"):
        _launcher(tmp_path, closed / "shared").prepare()
