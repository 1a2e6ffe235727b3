"""Following Slurm jobs as local ones are followed: a silent replica is a stall, and a
retry attempt runs against its first attempt's output folder (its checkpoints)."""
from __future__ import annotations

import json
import os

from tests.backends.slurm.conftest import spec
from tests.conftest import ONE_DATABASE
from tests.waiting import wait_for

pytestmark = ONE_DATABASE


def test_a_silent_replica_is_a_stall(make_slurm_client, cluster, tmp_path):
    api = make_slurm_client()
    never = tmp_path / "never"
    template = spec(["--wait-file", str(never)])
    template["scheduling"] = {"stall_timeout_seconds": 2}
    api.template("quiet", template)
    job = api.submit("quiet")
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED", "CANCELLED")
    assert done["state"] == "FAILED"
    assert done["error"]["replica"] == "workerpool0-0" and "stall_timeout_seconds" in done["error"]["message"]
    # Judged by the lifecycle (lifecycle/stalls.py), as for every backend: one code, one source.
    assert (done["error"]["code"], done["error"]["source"]) == (4, "trainjobs")
    wait_for(lambda: not cluster.jobs_active(), "the stalled Slurm job to be cancelled", 60)


def test_a_retry_uses_the_first_attempts_output(make_slurm_client, cluster, tmp_path):
    api = make_slurm_client()
    dump = tmp_path / "env"
    dump.mkdir()
    os.chmod(dump, 0o777)
    template = spec(["--dump-env", str(dump), "--exit", "3"])
    template["retry"] = {"max_attempts": 2, "exit_codes": [3], "backoff": {"initial_seconds": 0}}
    api.template("flaky", template)
    first = api.submit("flaky")
    failed = api.wait_state(first["id"], "FAILED")
    second_id = wait_for(lambda: api.job(first["id"]).get("retried_by"), "the second attempt")
    second = api.wait_state(second_id, "FAILED")
    assert second["attempt"] == 2 and second["backend_ref"] != failed["backend_ref"]
    env_first = json.loads((dump / f"chief-0-{failed['backend_ref']}.json").read_text())
    env_second = json.loads((dump / f"chief-0-{second['backend_ref']}.json").read_text())
    assert env_second["AIP_CHECKPOINT_DIR"] == env_first["AIP_CHECKPOINT_DIR"]
    assert first["id"] in env_second["AIP_CHECKPOINT_DIR"]
