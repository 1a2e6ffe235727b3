"""`trainjobs sweeps ...` as a real subprocess and client.sweeps, against a real server
(uvicorn in a thread, the local backend running programs/replica.py)."""
from __future__ import annotations

import json

import pytest

from tests.cli.conftest import anyio_backend, cli, server, tj, viewer_token  # noqa: F401
from tests.client.conftest import no_user_config  # noqa: F401
from tests.sweeps.helpers import sweep_body, template

SWEEP_YAML = """\
template: sweepable
algorithm: grid
parameters:
  acc: {values: [0.2, 0.7]}
fixed_parameters: {epochs: 2}
max_parallel: 2
objective: {metric: val_accuracy, goal: maximize}
"""


@pytest.fixture
def sweepable(tj):  # noqa: F811
    t = template()
    tj.templates.create(t["name"], t["spec"], t["parameters"])


def test_create_wait_get_list_cancel(cli, sweepable, tmp_path):  # noqa: F811
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP_YAML)
    planned = cli("sweeps", "create", str(path), "--dry-run", "-o", "json")
    assert planned.returncode == 0, planned.stderr
    assert [t["parameters"] for t in json.loads(planned.stdout)["trials"]] == [{"epochs": 2, "acc": 0.2},
                                                                                {"epochs": 2, "acc": 0.7}]
    assert cli("sweeps", "list", "-o", "json").stdout.strip() == "[]"   # a dry run stores nothing

    done = cli("sweeps", "create", str(path), "--wait", "--timeout", "120", "-o", "json")
    assert done.returncode == 0, done.stderr
    sweep = json.loads(done.stdout)
    assert sweep["state"] == "SUCCEEDED" and sweep["best"]["parameters"]["acc"] == 0.7

    shown = cli("sweeps", "get", sweep["id"])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    rows = [line.split() for line in lines if line.split()[:1] in (["1"], ["2"])]
    assert [r[0] for r in rows] == ["2", "1"]            # ranked: trial 2 (acc 0.7) first
    assert "maximize val_accuracy" in shown.stdout
    # A sweep is also taken by a unique id prefix or its display name (issue 25, point 2).
    for ref in (sweep["id"][:6], sweep["display_name"]):
        assert json.loads(cli("sweeps", "get", ref, "-o", "json").stdout)["id"] == sweep["id"], ref
    assert "no sweep has an id starting with 'nope-sweep'" in cli("sweeps", "wait", "nope-sweep").stderr

    listed = cli("sweeps", "list")
    assert sweep["id"] in listed.stdout and "2/2" in listed.stdout and "#2 0.7" in listed.stdout
    again = cli("sweeps", "cancel", sweep["id"])
    assert again.returncode != 0 and "already ended" in again.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(SWEEP_YAML.replace("0.7", "1.7"))
    refused = cli("sweeps", "create", str(bad))
    assert refused.returncode != 0 and "parameters.acc.values[1]" in refused.stderr, refused.stderr


def test_client_sweeps(tj, sweepable):  # noqa: F811
    from trainjobs_client import InvalidRequest, WaitTimeout
    never = {"chief": {"container": {"args": ["--wait-file", "/nonexistent/never"]}}}
    sweep = tj.sweeps.create(sweep_body(parameters={"acc": {"values": [0.1, 0.2, 0.3]}}, overrides=never,
                                        max_parallel=1))
    assert sweep.state == "RUNNING" and sweep.trial_count == 3
    with pytest.raises(WaitTimeout, match=f"sweep {sweep.id} is still RUNNING"):
        tj.sweeps.wait(sweep, timeout=0.2)
    assert [s.id for s in tj.sweeps.list(state="RUNNING")] == [sweep.id]
    cancelled = tj.sweeps.cancel(sweep)
    assert cancelled.state == "CANCELLING"
    final = tj.sweeps.wait(sweep, timeout=120)
    assert final.state == "CANCELLED" and final.final and final.counts.get("WAITING", 0) >= 2
    with pytest.raises(InvalidRequest) as e:
        tj.sweeps.create(sweep_body(parameters={"acc": {"values": [2]}}), dry_run=True)
    assert e.value.errors[0].field == "parameters.acc.values[0]"


@pytest.mark.anyio
async def test_async_client_sweeps(server, token, sweepable):  # noqa: F811
    from trainjobs_client import AsyncClient
    async with AsyncClient(server, token, backoff=0.01) as c:
        planned = await c.sweeps.create(sweep_body(algorithm="random", parameters={"acc": {}}, trial_count=3,
                                                   seed=5), dry_run=True)
        assert planned.seed == 5 and len(planned.trials) == 3
        assert all(0 <= t.parameters["acc"] <= 1 for t in planned.trials)
        assert [s async for s in c.sweeps.list()] == []



def test_a_paused_sweep_says_why_and_resumes(cli, tj, tmp_path, db_url, server, token):  # noqa: F811
    import httpx

    from tests.conftest import make_token
    member = make_token(db_url, "alpha", "member", "carol")
    path = tmp_path / "sweep.yaml"
    gate = tmp_path / "gate"   # its trials wait for this file: the sweep is surely still RUNNING when revoked
    t = template(chief_extra=["--wait-file", str(gate)])
    tj.templates.create("gated", t["spec"], t["parameters"])
    path.write_text(SWEEP_YAML.replace("max_parallel: 2", "max_parallel: 1").replace("sweepable", "gated"))
    made = cli("sweeps", "create", str(path), "-o", "json", TRAINJOBS_TOKEN=member)
    assert made.returncode == 0, made.stderr
    sweep_id = json.loads(made.stdout)["id"]
    admin = {"Authorization": f"Bearer {token}"}
    [carol] = [t for t in httpx.get(f"{server}/v1/tokens", headers=admin).json() if t["name"] == "carol"]
    assert httpx.post(f"{server}/v1/tokens/{carol['id']}/revoke", headers=admin).status_code == 200
    shown = cli("sweeps", "get", sweep_id)
    assert shown.returncode == 0, shown.stderr
    assert "PAUSED" in shown.stdout and "carol" in shown.stdout and "revoked" in shown.stdout, shown.stdout
    resumed = cli("sweeps", "resume", sweep_id, "-o", "json")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["state"] == "RUNNING", resumed.stderr
    gate.write_text("")
    assert cli("sweeps", "wait", sweep_id, "--timeout", "120").returncode == 0
