"""GET /v1/jobs/{id}/export and /v1/templates/{name}/export on SQLite and PostgreSQL:
the CustomJob as launched, as a gcloud command, a --config file and a Vertex SDK snippet."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from service.interop import gcloud_flags, shell_text
from tests.conftest import ONE_DATABASE, bearer
from tests.interop.conftest import assert_problem

pytestmark = ONE_DATABASE

POOLS = ["machine-type=n1-standard-8,replica-count=1,container-image-uri=gcr.io/p/trainer:2",
         "",
         "machine-type=n1-highmem-16,replica-count=3,container-image-uri=gcr.io/p/trainer:2",
         "machine-type=e2-standard-4,container-image-uri=gcr.io/p/eval:2"]


def flag_values(command: str, flag: str) -> list[str]:
    out = []
    for word in shell_text.tokens(command):
        name, _, value = word.partition("=")
        if name == flag:
            out.append(value)
    return out


def test_round_trip_worker_pool_specs_through_gcloud(client):
    r = client.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": POOLS, "name": "rt"})
    assert r.status_code == 201, r.text
    exported = client.get("/v1/templates/rt/export?format=gcloud")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/plain")
    command = exported.text
    assert "--config" not in command  # plain pools: flags say it all
    back = flag_values(command, "--worker-pool-spec")
    assert len(back) == 4 and back[1] == ""
    parse = lambda values: [gcloud_flags.parse_pool("p", v, [], [])[0] for v in values]  # noqa: E731
    assert parse(back) == parse(POOLS)
    # The exported command imports back to the same template.
    again = client.post("/v1/templates:import", json={"format": "gcloud", "source": command})
    assert again.status_code == 200, again.text
    assert again.json()["spec"] == r.json()["spec"]
    assert flag_values(command, "--region") == ["us-central1"]


def test_what_flags_cannot_say_goes_in_a_config_file(client):
    gpu = ["machine-type=n1-standard-8,accelerator-type=NVIDIA_TESLA_T4,accelerator-count=2,"
           "container-image-uri=gcr.io/p/t:1"]
    client.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": gpu, "name": "gpu"})
    command = client.get("/v1/templates/gpu/export").text
    assert "environment variables" in command  # the expected-GPU count each replica checks
    config = yaml.safe_load(re.search(r"<<'(\w+)'\n(.*?)\n\1\n", command, re.S).group(2))
    assert config == yaml.safe_load(client.get("/v1/templates/gpu/export?format=config").text)
    pool = config["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                   "acceleratorCount": 2}
    assert pool["replicaCount"] == 1
    assert "--config=trainjobs-customjob.yaml" in command
    # The whole of it (the file written first, then the command) imports back to the same template.
    again = client.post("/v1/templates:import", json={"format": "gcloud", "source": command})
    assert again.status_code == 200, again.text
    assert again.json()["spec"] == client.get("/v1/templates/gpu").json()["spec"]
    no_file = command[command.index("gcloud ai"):]
    assert_problem(client.post("/v1/templates:import", json={"format": "gcloud", "source": no_file}), 422, "--config")
    mixed = command + " --args=--x"
    assert_problem(client.post("/v1/templates:import", json={"format": "gcloud", "source": mixed}), 422, "--args")


def test_job_export_is_what_was_launched(client, demo):
    job = client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 7},
                                        "labels": {"owner": "ana"}}).json()
    launched = client.get(f"/v1/jobs/{job['id']}").json()["custom_job"]
    config = yaml.safe_load(client.get(f"/v1/jobs/{job['id']}/export?format=config").text)
    want = launched["jobSpec"]
    for p in want["workerPoolSpecs"]:
        p["replicaCount"] = int(p["replicaCount"])
    assert config == want
    command = client.get(f"/v1/jobs/{job['id']}/export").text
    assert "timeout: 3600s" in command and "--epochs=7" in command  # scheduling needs the config file
    assert "--labels=app=trainjobs-demo,owner=ana" in command
    assert "trainjobs_job_id" not in command and job["id"] not in command.split("\n", 1)[1]
    assert f"--display-name={job['display_name']}" in command
    assert_problem(client.get(f"/v1/jobs/{job['id']}/export?format=yaml"), 422)
    assert_problem(client.get("/v1/jobs/00000000-0000-0000-0000-000000000000/export"), 404)


def test_viewers_export_members_do_not_import(client, demo, tokens):
    viewer = bearer(tokens["viewer"])
    assert client.get("/v1/templates/mwms-demo/export?format=sdk", headers=viewer).status_code == 200
    assert_problem(client.post("/v1/templates:import", headers=viewer,
                               json={"format": "worker-pool-specs", "source": POOLS}), 403)


def test_template_export_takes_parameters_and_versions(client, demo):
    text = client.get("/v1/templates/mwms-demo/export?format=config&param=epochs=9&param=learning_rate=0.5").text
    args = yaml.safe_load(text)["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert "--epochs=9" in args and "--learning-rate=0.5" in args
    assert "epochs=9" in text.splitlines()[0]
    assert_problem(client.get("/v1/templates/mwms-demo/export?param=epochs=x"), 422, "param.epochs")
    assert_problem(client.get("/v1/templates/mwms-demo/export?param=epochs=1000"), 422, "parameters.epochs")
    assert_problem(client.get("/v1/templates/mwms-demo/export?param=nope=1"), 422, "parameters.nope")
    assert_problem(client.get("/v1/templates/mwms-demo/export?version=2"), 404)
    assert_problem(client.get("/v1/templates/missing/export"), 404)


def test_sdk_snippet_builds_the_same_custom_job(client, demo, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs as sdk_jobs
    from google.cloud.aiplatform_v1 import CustomJob

    job = client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": {
        "workers": {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
        "base_output_directory": "gs://bucket/out", "scheduling": {"strategy": "SPOT"}}}).json()
    assert "id" in job, job
    snippet = client.get(f"/v1/jobs/{job['id']}/export?format=sdk").text
    runs: list[dict] = []
    # Only the call to Google is replaced: everything up to it is the SDK's own code.
    monkeypatch.setattr(sdk_jobs.CustomJob, "run", lambda self, **kw: runs.append(kw))
    aiplatform.init(credentials=AnonymousCredentials(), project="test-project")
    scope: dict = {}
    exec(compile(snippet, "snippet", "exec"), scope)  # noqa: S102 - our own output, under test
    built = scope["job"]._gca_resource
    launched = CustomJob.from_json(json.dumps(client.get(f"/v1/jobs/{job['id']}").json()["custom_job"]))
    assert list(built.job_spec.worker_pool_specs) == list(launched.job_spec.worker_pool_specs)
    assert built.job_spec.base_output_directory.output_uri_prefix == "gs://bucket/out"
    assert built.display_name == launched.display_name
    assert runs == [{"timeout": 3600, "scheduling_strategy": launched.job_spec.scheduling.strategy}]


@pytest.mark.parametrize("fmt", ["gcloud", "config", "sdk"])
def test_every_format_answers_text(client, demo, fmt):
    r = client.get(f"/v1/templates/mwms-demo/export?format={fmt}")
    assert r.status_code == 200 and r.text.startswith("# trainjobs template mwms-demo version 1")


RICH = {"distribution": "multi_worker_mirrored",
        "container": {"image_uri": "gcr.io/p/t:1", "command": ["python", "-m", "trainer.task"],
                      "args": ["--epochs=3", "--name=a b,c"], "env": {"MODE": "train"}},
        "chief": {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2},
        "workers": {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2,
                    "replica_count": 3, "disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 200},
                    "container": {"env": {"EXTRA": "1"}}},
        "evaluator": {"machine_type": "e2-standard-4", "container": {"args": ["--evaluate"]}},
        "base_output_directory": "gs://bucket/rich",
        "scheduling": {"timeout_seconds": 5400, "strategy": "SPOT", "restart_job_on_worker_restart": True},
        "service_account": "sa@p.iam.gserviceaccount.com", "enable_web_access": True}


def test_every_export_imports_back_through_its_config_file(client):
    created = client.post("/v1/templates", json={"name": "rich", "spec": RICH})
    assert created.status_code == 201, created.text
    config = client.get("/v1/templates/rich/export?format=config").text
    back = client.post("/v1/templates:import", json={"format": "vertex-config", "source": config, "name": "rich2"})
    assert back.status_code == 201, back.text
    assert back.json()["spec"] == created.json()["spec"]
    assert [w["field"] for w in back.json()["warnings"]] == ["workerPoolSpecs[0].containerSpec.env",
                                                             "workerPoolSpecs[1].containerSpec.env"]
    assert client.get("/v1/templates/rich2/export?format=config").text.split("\n", 1)[1] == \
        config.split("\n", 1)[1].replace("template rich ", "template rich2 ")
    bad = config.replace("  replicaCount: 3", "  replicaCount: 3\n  nfsMounts: []")
    assert_problem(client.post("/v1/templates:import", json={"format": "vertex-config", "source": bad}), 422,
                   "workerPoolSpecs[1].nfsMounts")


def test_the_gcloud_export_runs_in_a_shell_as_written(client, demo, tmp_path):
    """The exported text run by bash, with a stand-in `gcloud` that records what it gets:
    exactly the flags and config file meant, whatever the display name and arguments hold."""
    import subprocess

    # (Names refuse line breaks now, service.core.text; the arguments below still carry one.)
    hostile = "x; touch pwned-name $(touch pwned-subst) `touch pwned-tick` ' \" ; #"
    job = client.post("/v1/jobs", json={"template": "mwms-demo", "display_name": hostile,
                                        "overrides": {"container": {"args": ["--a=1,2", "it's", "$HOME", "\nx"]}}})
    assert job.status_code == 201, job.text
    script = client.get(f"/v1/jobs/{job.json()['id']}/export").text
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text('#!/usr/bin/env python3\nimport json, sys\n'
                                    'open("argv.json", "w").write(json.dumps(sys.argv[1:]))\n')
    (bin_dir / "gcloud").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(["bash", "-c", script], cwd=work, env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in work.iterdir()) == ["argv.json", "trainjobs-customjob.yaml"]  # nothing pwned
    argv = json.loads((work / "argv.json").read_text())
    assert argv[:4] == ["ai", "custom-jobs", "create", "--region=us-central1"]
    assert f"--display-name={hostile}" in argv and "--config=trainjobs-customjob.yaml" in argv
    written = yaml.safe_load((work / "trainjobs-customjob.yaml").read_text())
    assert written == yaml.safe_load(client.get(f"/v1/jobs/{job.json()['id']}/export?format=config").text)
    assert written["workerPoolSpecs"][0]["containerSpec"]["args"] == ["--a=1,2", "it's", "$HOME", "\nx"]
