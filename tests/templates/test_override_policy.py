"""Who may change what: a member launches what the template allows, and nothing
more; an admin may override anything, and the job's events say so. On SQLite and
PostgreSQL, through the API."""
import copy
import json

import pytest

from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer

OPEN = ["workers.replica_count", "workers", "scheduling.timeout_seconds", "container.env.BATCH_SIZE"]


def template(name="open", overridable=OPEN, env=None, parameters=None, **spec_changes):
    body = copy.deepcopy(DEMO)
    body["name"] = name
    body["spec"]["overridable"] = overridable
    body["spec"]["container"]["env"] = env or {}
    body["spec"].update(spec_changes)
    if parameters is not None:
        body["parameters"] = parameters
    return body


@pytest.fixture
def open_template(client):
    r = client.post("/v1/templates", json=template())
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def member(tokens):
    return bearer(tokens["member"])


def launch(client, headers, overrides, dry_run=False, name="open"):
    return client.post("/v1/jobs", params={"dry_run": dry_run} if dry_run else None, headers=headers,
                       json={"template": name, "overrides": overrides})


@pytest.mark.parametrize("overrides,field", [
    ({"container": {"command": ["python", "-c", "import os; print(os.environ)"]}}, "overrides.container.command"),
    ({"container": {"args": ["--evil"]}}, "overrides.container.args"),
    ({"container": {"image_uri": "attacker/image:latest"}}, "overrides.container.image_uri"),
    ({"container": {"env": {"LD_PRELOAD": "/tmp/x.so"}}}, "overrides.container.env.LD_PRELOAD"),
    ({"service_account": "owner@project.iam.gserviceaccount.com"}, "overrides.service_account"),
    ({"network": "projects/1/global/networks/prod"}, "overrides.network"),
    ({"base_output_directory": "gs://other-team/models"}, "overrides.base_output_directory"),
    ({"enable_web_access": True}, "overrides.enable_web_access"),
    # `workers` is overridable, but a parent path never grants the code a replica runs.
    ({"workers": {"container": {"command": ["sh", "-c", "id"]}}}, "overrides.workers.container.command"),
    ({"chief": {"machine_type": "n1-standard-8"}}, "overrides.chief.machine_type"),
])
def test_a_member_cannot_change_what_the_template_does_not_open(client, open_template, member, overrides, field):
    for dry_run in (False, True):
        body = assert_problem(launch(client, member, overrides, dry_run), 403, field)
        assert body["type"].endswith("/forbidden")
        assert "only an admin of team alpha may change it" in body["detail"]
        problem = next(e for e in body["errors"] if e["field"] == field)
        assert "does not let members change it" in problem["message"]
        assert "workers.replica_count" in problem["fix"] and "an admin of team alpha" in problem["fix"]
    assert client.get("/v1/jobs").json()["items"] == []  # nothing was stored or launched


def test_a_member_changes_what_the_template_opens(client, open_template, member):
    r = launch(client, member, {"workers": {"replica_count": 3, "machine_type": "n1-standard-8"},
                                "scheduling": {"timeout_seconds": 60},
                                "container": {"env": {"BATCH_SIZE": "64"}}})
    assert r.status_code == 201, r.text
    job = r.json()
    pools = job["custom_job"]["jobSpec"]["workerPoolSpecs"]
    assert pools[1]["replicaCount"] == "3" and pools[1]["machineSpec"]["machineType"] == "n1-standard-8"
    assert all(r["env"]["BATCH_SIZE"] == "64" for r in job["cluster"])
    events = client.get(f"/v1/jobs/{job['id']}/events").json()
    assert [(e["reason"], e["actor"]) for e in events] == [("submitted", "member-user@alpha")]


def test_setting_a_field_to_the_templates_value_is_no_change(client, open_template, member):
    same = {"container": {"image_uri": DEMO["spec"]["container"]["image_uri"]}, "chief": {"replica_count": 1}}
    assert launch(client, member, same).status_code == 201


def test_a_member_may_not_add_a_role_only_its_fields_are_open_for(client, member):
    client.post("/v1/templates", json=template("evalfields", overridable=["evaluator.machine_type"]))
    body = assert_problem(launch(client, member, {"evaluator": {"machine_type": "n1-standard-4"}}, name="evalfields"),
                          403, "overrides.evaluator")
    assert "overrides.evaluator.machine_type" not in [e["field"] for e in body["errors"]]


def test_a_member_removing_a_role_removes_what_was_beneath_it(client, member):
    spec = template("rolecmd", overridable=["workers"])
    spec["spec"]["workers"]["container"] = {"command": ["python", "-m", "trainer.task"]}
    assert client.post("/v1/templates", json=spec).status_code == 201
    assert_problem(launch(client, member, {"workers": None}, name="rolecmd"), 403, "overrides.workers.container.command")


def test_an_admin_overrides_anything_and_the_events_say_so(client, open_template, tokens):
    command = ["python", "-c", "print('admin debugging')"]
    r = launch(client, bearer(tokens["admin"]), {"container": {"command": command, "env": {"LD_PRELOAD": "libx.so"}},
                                                 "workers": {"replica_count": 2}})
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["cluster"][0]["command"] == command and job["cluster"][0]["env"]["LD_PRELOAD"] == "libx.so"
    (event,) = client.get(f"/v1/jobs/{job['id']}/events").json()
    assert event["actor"] == "admin-user@alpha"
    assert event["reason"].startswith("submitted; admin override beyond the template's overridable fields:")
    assert "container.command" in event["reason"] and "container.env.LD_PRELOAD" in event["reason"]
    assert "workers.replica_count" not in event["reason"]  # that one was open to anyone


def test_a_viewer_still_cannot_launch(client, open_template, tokens):
    assert_problem(launch(client, bearer(tokens["viewer"]), {}), 403)


def test_nobody_changes_the_overridable_list_from_a_job(client, open_template, tokens):
    for role in ("member", "admin"):
        assert_problem(launch(client, bearer(tokens[role]), {"overridable": ["container"]}), 422,
                       "overrides.overridable")


def test_startup_env_is_refused_to_members_even_where_env_is_open(client, member):
    client.post("/v1/templates", json=template("envopen", overridable=["container.env", "container.env.PYTHONUNBUFFERED"],
                                               env={"PATH": "/usr/bin", "NCCL_DEBUG": "WARN"}))
    for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONWARNINGS", "PYTHONSTARTUP", "BROWSER",
                 "PERL5OPT", "NODE_OPTIONS", "BASH_ENV", "ENV", "GCONV_PATH", "MALLOC_CHECK_", "GLIBC_TUNABLES",
                 "HOME", "http_proxy", "GOOGLE_APPLICATION_CREDENTIALS", "OPENSSL_CONF",
                 # and the families of what issue 22 found accepted
                 "GRPC_PROXY", "grpc_proxy", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "OMP_TOOL_LIBRARIES",
                 "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "KRB5_CONFIG", "KRB5CCNAME", "STORAGE_EMULATOR_HOST",
                 "PUBSUB_EMULATOR_HOST", "socks_proxy", "UV_INDEX_URL", "AWS_CA_BUNDLE"):
        body = assert_problem(launch(client, member, {"container": {"env": {name: "x"}}}, name="envopen"),
                              422, f"overrides.container.env.{name}")
        assert "only an admin" in body["errors"][0]["message"]
    # Changing or removing the template's own PATH is as bad as setting one.
    assert_problem(launch(client, member, {"container": {"env": {"PATH": "/tmp"}}}, name="envopen"), 422,
                   "overrides.container.env.PATH")
    assert_problem(launch(client, member, {"container": {"env": {"PATH": None}}}, name="envopen"), 422,
                   "overrides.container.env.PATH")
    ok = launch(client, member, {"container": {"env": {"PYTHONUNBUFFERED": "1", "NCCL_DEBUG": "INFO"}}}, name="envopen")
    assert ok.status_code == 201, ok.text


def test_variables_the_service_sets_are_set_by_nobody(client, tokens):
    for name in ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "TF_CONFIG", "CLUSTER_SPEC", "CLOUD_ML_JOB_ID",
                 "TRAINJOBS_LOCAL_REPLICA"):
        assert_problem(client.post("/v1/templates", json=template(f"res-{name.lower().replace('_', '-')}",
                                                                  env={name: "/anywhere"})),
                       422, f"spec.container.env.{name}")
    client.post("/v1/templates", json=template("envopen2", overridable=["container.env"]))
    for role, where in (("member", "container"), ("admin", "workers.container")):
        patch = {"env": {"AIP_MODEL_DIR": "/anywhere"}}
        for part in reversed(where.split(".")):
            patch = {part: patch}
        body = assert_problem(launch(client, bearer(tokens[role]), patch, name="envopen2"), 422,
                              f"spec.{where}.env.AIP_MODEL_DIR")
        assert "no template or job may set it" in body["errors"][0]["message"]


def test_an_admins_template_sets_startup_env_and_members_launch_it(client, member):
    r = client.post("/v1/templates", json=template("preload", env={"LD_LIBRARY_PATH": "/opt/lib",
                                                                   "PYTHONPATH": "/app/${mode}"},
                                                   parameters=DEMO["parameters"] + [
                                                       {"name": "mode", "type": "string", "default": "a",
                                                        "choices": ["a", "b"]}]))
    assert r.status_code == 201, r.text
    job = client.post("/v1/jobs", headers=member, json={"template": "preload", "parameters": {"mode": "b"}}).json()
    assert job["cluster"][0]["env"]["LD_LIBRARY_PATH"] == "/opt/lib"
    assert job["cluster"][0]["env"]["PYTHONPATH"] == "/app/b"


def test_startup_env_filled_from_an_open_parameter_is_refused(client):
    body = template("openparam", env={"PYTHONPATH": "${where}"},
                    parameters=DEMO["parameters"] + [{"name": "where", "type": "string", "default": "/app"}])
    r = assert_problem(client.post("/v1/templates", json=body), 422, "spec.container.env.PYTHONPATH")
    assert [e["field"] for e in r["errors"]] == ["spec.container.env.PYTHONPATH"]
    assert "choices" in r["errors"][0]["fix"]


@pytest.mark.parametrize("path,why", [
    ("workers.replicas", "has no field 'replicas'"),
    ("replica_count", "the spec has no field 'replica_count'"),
    ("workers.replica_count.x", "has no fields beneath it"),
    ("container.env.A.B", "is a map"),
    ("container.env.$HOME", "is a map"),
    ("overridable", "has no field 'overridable'"),
    ("", "has no field ''"),
])
def test_unknown_overridable_paths_are_refused_when_stored(client, path, why):
    body = assert_problem(client.post("/v1/templates", json=template("badpath", overridable=[path])), 422,
                          "spec.overridable[0]")
    assert why in body["errors"][0]["message"], body
    # An update is checked the same way.
    client.post("/v1/templates", json=template("goodpath"))
    update = template("goodpath", overridable=["workers", path])
    del update["name"]
    assert_problem(client.put("/v1/templates/goodpath", json=update), 422, "spec.overridable[1]")


def test_valid_paths_are_stored_and_shown(client):
    paths = ["workers", "evaluator.disk.boot_disk_size_gb", "labels.team", "container.env.BATCH_SIZE",
             "scheduling", "reduction_server.replica_count", "container.args"]
    r = client.post("/v1/templates", json=template("shown", overridable=paths))
    assert r.status_code == 201, r.text
    assert client.get("/v1/templates/shown").json()["spec"]["overridable"] == paths


def test_a_403_lists_a_bounded_number_of_fields(client, open_template, member):
    many = {"labels": {f"k{i}": "v" for i in range(500)}}
    r = launch(client, member, many)
    body = assert_problem(r, 403)
    assert len(body["errors"]) == 50 and body["errors_omitted"] == 450
    assert len(r.content) < 64 * 1024


def test_the_demo_template_opens_the_readme_example_to_members(client, demo, member):
    r = client.post("/v1/jobs", headers=member, json={"template": "mwms-demo", "parameters": {"epochs": 3},
                                                      "overrides": {"workers": {"replica_count": 3}}})
    assert r.status_code == 201, r.text
    assert json.loads(r.json()["cluster"][1]["env"]["TF_CONFIG"])["task"]["type"] == "worker"
