"""A label cannot choose the Slurm account or QoS once the operator maps them (issue 48, point 1):
members of three teams attack through the API with docs/slurm.md's own mapping and no ALLOWED_*
lists (the default), against the real cluster. The account comes from the team and the QoS from
the priority class, nothing else: a label naming anything else is a 422 at submit naming it, and
never reaches sbatch; a label naming what the mapping gives is harmless."""
from __future__ import annotations

import pytest

from service.backends.slurm import SlurmBackend
from service.backends.slurm.entry import slurm_config_of
from tests.backends.slurm.conftest import slurm_settings, spec
from tests.conftest import bearer, make_token
from tests.waiting import wait_for

# docs/slurm.md, "Sharing the cluster".
TEAM_ACCOUNTS = {"vision": "vision"}
PRIORITY_QOS = {"urgent": "high", "batch": "low"}


@pytest.fixture
def attack(api_client, db_url, cluster, slurm_work_dir):
    """One service with the docs' mapping; sbatch's real argv recorded on the way to Slurm."""
    settings = slurm_settings(db_url, cluster, slurm_work_dir, slurm_team_accounts=TEAM_ACCOUNTS,
                              slurm_priority_qos=PRIORITY_QOS)
    backend = SlurmBackend(slurm_config_of(settings))
    argvs: list[list[str]] = []
    real = backend.cli.sbatch

    def recording(argv: list[str]) -> str:
        argvs.append(list(argv))
        return real(argv)
    backend.cli.sbatch = recording   # type: ignore[method-assign]
    operator = bearer(make_token(db_url, "ops", "operator"))
    with api_client(settings, backends={"slurm": backend}) as c:
        for name, body in (("urgent", {"value": 100, "teams": ["vision"]}), ("batch", {"value": 1})):
            r = c.put(f"/v1/priority-classes/{name}", json=body, headers=operator)
            assert r.status_code in (200, 201), r.text
        teams = {t: (bearer(make_token(db_url, t, "admin")), bearer(make_token(db_url, t, "member")))
                 for t in ("default", "other", "vision")}
        for admin, _ in teams.values():
            for name, extra in (("plain", {}), ("urgent-work", {"priority_class": "urgent"}),
                                ("batch-work", {"priority_class": "batch"})):
                r = c.post("/v1/templates", json={"name": name, "spec": spec(["--lines", "1"], **extra)},
                           headers=admin)
                assert r.status_code == 201, r.text
        yield c, teams, argvs


def _submit(c, member: dict, template: str, labels: dict | None = None):
    return c.post("/v1/jobs", json={"template": template, "backend": "slurm", "labels": labels or {}},
                  headers=member)


def _refused(r, label: str, *words: str) -> dict:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = next(e for e in r.json()["errors"] if e["field"] == f"labels.{label}")
    for w in words:
        assert w in problem["message"] + problem["fix"], problem
    assert problem["fix"].startswith("remove the label"), problem
    return problem


def test_a_label_cannot_choose_the_qos_or_the_account(attack, cluster):
    c, teams, argvs = attack
    default, other, vision = (teams[t][1] for t in ("default", "other", "vision"))
    # Team default may not use class urgent (its QoS is high)...
    assert _submit(c, default, "urgent-work").status_code == 403
    # ...nor get its QoS by label on a job without a class (it used to be sbatch --qos=high).
    _refused(_submit(c, default, "plain", {"slurm-qos": "high"}), "slurm-qos", "TRAINJOBS_SLURM_PRIORITY_QOS",
             "a job without a priority class", "'urgent'")
    # A class-batch job naming another QoS: refused at submit (it used to be accepted and fail at launch).
    _refused(_submit(c, vision, "batch-work", {"slurm-qos": "high"}), "slurm-qos", "priority class 'batch'",
             "'low'")
    # Team other, no account of its own, cannot charge team vision's (it used to be sbatch --account=vision);
    # team vision's member cannot charge another either.
    _refused(_submit(c, other, "plain", {"slurm-account": "vision"}), "slurm-account",
             "TRAINJOBS_SLURM_TEAM_ACCOUNTS", "team 'other'")
    _refused(_submit(c, vision, "plain", {"slurm-account": "other"}), "slurm-account", "team 'vision'", "'vision'")
    assert argvs == [] and not cluster.jobs_active()   # nothing refused reached Slurm

    # What the mapping gives, labelled or not, runs: sbatch's argv and Slurm's own record of the account.
    jobs = {}
    for team, member, template, labels in (
            ("vision", vision, "urgent-work", {"slurm-account": "vision", "slurm-qos": "high"}),
            ("other", other, "batch-work", {"slurm-qos": "low"}), ("default", default, "plain", {})):
        r = _submit(c, member, template, labels)
        assert r.status_code == 201, r.text
        jobs[team] = r.json()["id"]
    ended = {team: _ended(c, teams[team][1], job_id) for team, job_id in jobs.items()}
    assert all(j["state"] == "SUCCEEDED" for j in ended.values()), ended
    args = {team: next(a for a in argvs if f"--comment=trainjobs job {job_id}" in a) for team, job_id in jobs.items()}
    assert "--account=vision" in args["vision"] and "--qos=high" in args["vision"], args
    assert "--qos=low" in args["other"] and not any(a.startswith("--account=") for a in args["other"]), args
    assert not any(a.startswith(("--account=", "--qos=")) for a in args["default"]), args
    account = {team: cluster.run("squeue", "-h", "--states=all", "-j", j["backend_ref"], "-o", "%a").strip()
               for team, j in ended.items()}
    assert account["vision"] == "vision" and account["other"] != "vision", account


def _ended(c, member: dict, job_id: str) -> dict:
    def end():
        job = c.get(f"/v1/jobs/{job_id}", headers=member).json()
        return job if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None
    return wait_for(end, f"job {job_id} to end", 90)
