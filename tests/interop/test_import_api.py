"""POST /v1/templates:import on SQLite and PostgreSQL: AI Platform configs and gcloud
flags become templates that pass the same validation as any other."""
from __future__ import annotations

import pytest

from tests.conftest import bearer
from tests.interop.conftest import assert_problem

CUSTOM = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-highcpu-16
  masterConfig:
    imageUri: gcr.io/my-project/trainer:1
    acceleratorConfig: {count: 2, type: NVIDIA_TESLA_T4}
  workerType: complex_model_m_gpu
  workerCount: "3"
  parameterServerType: large_model
  parameterServerCount: 2
  parameterServerConfig:
    imageUri: gcr.io/my-project/ps:1
  evaluatorType: n1-standard-8
  evaluatorCount: 1
  useChiefInTfConfig: true
  region: us-central1
  args: [--epochs, "5"]
  jobDir: gs://bucket/census
  scheduling: {maxRunningTime: 7200s}
labels: {team: census}
"""


def fields(body: dict) -> list[str]:
    return [w["field"] for w in body["warnings"]]


def test_custom_config_converts_every_role_and_reports_mappings(client):
    r = client.post("/v1/templates:import", json={"format": "aiplatform-config", "source": CUSTOM})
    assert r.status_code == 200, r.text
    body = r.json()
    spec = body["spec"]
    assert spec["distribution"] == "parameter_server"
    assert spec["container"] == {"image_uri": "gcr.io/my-project/trainer:1", "command": [],
                                 "args": ["--epochs", "5"], "env": {}}
    assert (spec["chief"]["machine_type"], spec["chief"]["accelerator_type"], spec["chief"]["accelerator_count"]) \
        == ("n1-highcpu-16", "NVIDIA_TESLA_T4", 2)
    # complex_model_m_gpu: complex_model_m with four K80s; the K80 is retired, so four T4s.
    w = spec["workers"]
    assert (w["machine_type"], w["accelerator_type"], w["accelerator_count"], w["replica_count"]) == \
        ("n1-highcpu-16", "NVIDIA_TESLA_T4", 4, 3)
    assert "container" not in w  # the master's image, as AI Platform ran it
    ps = spec["parameter_servers"]
    assert (ps["machine_type"], ps["replica_count"], ps["container"]) == \
        ("n1-highmem-8", 2, {"image_uri": "gcr.io/my-project/ps:1", "env": {}})
    assert spec["evaluator"]["machine_type"] == "n1-standard-8"
    assert spec["base_output_directory"] == "gs://bucket/census"
    assert spec["scheduling"]["timeout_seconds"] == 7200
    assert spec["labels"] == {"team": "census"}
    got = fields(body)
    for path in ("trainingInput.workerType", "trainingInput.parameterServerType", "trainingInput.region",
                 "trainingInput.jobDir"):
        assert path in got
    assert "trainingInput.useChiefInTfConfig" not in got  # it was true: nothing to say
    assert body["template"] is None
    assert client.get("/v1/templates").json()["items"] == []  # converting stores nothing


def test_named_import_is_stored_and_launchable(client):
    r = client.post("/v1/templates:import", json={"format": "aiplatform-config", "source": CUSTOM,
                                                  "name": "census", "description": "the old census job"})
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == "/v1/templates/census"
    stored = client.get("/v1/templates/census").json()
    assert stored["spec"] == r.json()["spec"] and stored["description"] == "the old census job"
    assert r.json()["template"]["version"] == 1
    preview = client.post("/v1/jobs?dry_run=true", json={"template": "census"})
    assert preview.status_code == 200, preview.text
    pools = preview.json()["custom_job"]["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "3", "2", "1"]
    assert pools[1]["machineSpec"] == {"machineType": "n1-highcpu-16", "acceleratorType": "NVIDIA_TESLA_T4",
                                       "acceleratorCount": 4}
    again = client.post("/v1/templates:import", json={"format": "aiplatform-config", "source": CUSTOM,
                                                      "name": "census"})
    assert_problem(again, 409)
    dry = client.post("/v1/templates:import", json={"format": "aiplatform-config", "source": CUSTOM,
                                                    "name": "other", "dry_run": True})
    assert dry.status_code == 200 and dry.json()["template"] is None
    assert client.get("/v1/templates/other").status_code == 404


def test_predefined_tiers_without_the_wrapper(client):
    r = client.post("/v1/templates:import", json={
        "format": "aiplatform-config", "source": "scaleTier: STANDARD_1\nmasterConfig: {imageUri: img:1}\n"})
    assert r.status_code == 200, r.text
    spec = r.json()["spec"]
    assert (spec["workers"]["replica_count"], spec["parameter_servers"]["replica_count"]) == (4, 3)
    tier = next(w for w in r.json()["warnings"] if w["field"] == "scaleTier" and "STANDARD_1" in w["message"])
    assert "Many workers and a few parameter servers" in tier["message"]
    basic = client.post("/v1/templates:import", json={
        "format": "aiplatform-config", "source": "scaleTier: BASIC_GPU\nmasterConfig: {imageUri: img:1}\n"}).json()
    assert basic["spec"]["chief"]["accelerator_type"] == "NVIDIA_TESLA_T4" and "workers" not in basic["spec"]
    assert "useChiefInTfConfig" not in fields(basic)  # one replica: no TF_CONFIG at all
    assert "useChiefInTfConfig" in fields(r.json())  # STANDARD_1 is distributed: "master" is now "chief"


@pytest.mark.parametrize("source, field, words", [
    ("trainingInput:\n  scaleTier: CUSTOM\n  masterType: standard\n  masterConfig: {imageUri: i:1}\n"
     "  workerCont: 3\n", "trainingInput.workerCont", "workerCount"),
    ("scaleTier: CUSTOM\nmasterType: standard\npythonModule: trainer.task\npackageUris: [gs://b/p.tar.gz]\n",
     "pythonModule", "image"),
    ("scaleTier: BASIC_TPU\nmasterConfig: {imageUri: i:1}\n", "scaleTier", "TPU"),
    ("scaleTier: CUSTOM\nmasterType: cloud_tpu\nmasterConfig: {imageUri: i:1}\n", "masterType", "TPU"),
    ("scaleTier: CUSTOM\nmasterType: standard\nmasterConfig: {imageUri: i:1}\nevaluatorType: standard\n"
     "evaluatorCount: 2\n", "spec.evaluator.replica_count", "one evaluator"),
    ("scaleTier: CUSTOM\nmasterType: n1-standard-4\nmasterConfig:\n  imageUri: i:1\n"
     "  acceleratorConfig: {count: 3, type: NVIDIA_TESLA_T4}\n", "spec.chief.accelerator_count", "not 3"),
    ("scaleTier: CUSTOM\nmasterType: standard\n", "masterConfig", "image"),
    ("scaleTier: CUSTOM\nmasterType: n1-standard-4\nmasterConfig: {imageUri: i, acceleratorConfig: {count: 2}}\n",
     "masterConfig.acceleratorConfig", "type and count"),
    ("scaleTier: CUSTOM\nmasterType: standard\nmasterConfig: {imageUri: i:1}\nworkerCount: 2\n",
     "workerType", "machine type"),
    ("- a list\n", "source", "mapping"),
])
def test_what_cannot_be_honoured_is_refused(client, source, field, words):
    body = assert_problem(client.post("/v1/templates:import", json={"format": "aiplatform-config",
                                                                    "source": source}), 422, field)
    assert any(words in (e["message"] + e.get("fix", "")) for e in body["errors"]), body


def test_only_admins_import(client, tokens):
    r = client.post("/v1/templates:import", headers=bearer(tokens["member"]),
                    json={"format": "aiplatform-config", "source": CUSTOM, "name": "x"})
    assert_problem(r, 403)


def test_gcloud_command_with_escaped_args_and_reduction_server(client):
    command = (
        "gcloud ai custom-jobs create --region=us-central1 --display-name=rs \\\n"
        "  --worker-pool-spec=machine-type=a2-highgpu-1g,accelerator-type=NVIDIA_TESLA_A100,"
        "container-image-uri=us-docker.pkg.dev/p/r/gpu:1 \\\n"
        "  --worker-pool-spec=machine-type=a2-highgpu-1g,replica-count=3,accelerator-type=NVIDIA_TESLA_A100,"
        "accelerator-count=1,container-image-uri=us-docker.pkg.dev/p/r/gpu:1 \\\n"
        "  --worker-pool-spec=machine-type=n1-highcpu-16,replica-count=2,"
        "container-image-uri=us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest \\\n"
        "  --labels=team=vision --enable-web-access\n")
    r = client.post("/v1/templates:import", json={"format": "gcloud", "source": command, "name": "rs"})
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert spec["workers"]["replica_count"] == 3 and spec["chief"]["accelerator_count"] == 1
    assert spec["reduction_server"]["replica_count"] == 2 and spec["reduction_server"]["client_installed"]
    assert spec["labels"] == {"team": "vision"} and spec["enable_web_access"] is True
    assert {"--region", "--display-name", "--worker-pool-spec[2]"} <= set(fields(r.json()))
    # gcloud gives --args to every pool: the reducers would get the trainer's arguments.
    with_args = command.replace("--labels", "--args=--epochs=3 --labels")
    body = assert_problem(client.post("/v1/templates:import", json={"format": "gcloud", "source": with_args}), 422,
                          "--worker-pool-spec[2]")
    assert "every pool" in body["errors"][0]["message"]


def test_gcloud_args_and_command_in_gcloud_escaping(client):
    command = ("gcloud beta ai custom-jobs create --region us-central1 --display-name='my job' "
               "--worker-pool-spec=machine-type=n1-standard-4,container-image-uri=img:1 "
               "--worker-pool-spec=machine-type=n1-standard-4,replica-count=2,container-image-uri=img:1 "
               "--command=python,-m,trainer.task --args='^;^--layers=1,2;--name=a b' "
               "--service-account=sa@p.iam.gserviceaccount.com  # a comment\n")
    r = client.post("/v1/templates:import", json={"format": "gcloud", "source": command})
    assert r.status_code == 200, r.text
    spec = r.json()["spec"]
    assert spec["container"]["args"] == ["--layers=1,2", "--name=a b"]
    assert spec["container"]["command"] == ["python", "-m", "trainer.task"]
    assert "container" not in spec["workers"]  # the same command and args: nothing to override
    assert spec["service_account"] == "sa@p.iam.gserviceaccount.com"


@pytest.mark.parametrize("command, field", [
    ("gcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,executor-image-uri=x,"
     "python-module=trainer.task", "--worker-pool-spec[0].executor-image-uri"),
    ("gcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,container-image-uri=i,"
     "disk=9", "--worker-pool-spec[0].disk"),
    ("gcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,container-image-uri=i "
     "--python-package-uris=gs://b/p.tgz", "--python-package-uris"),
    ("gcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,container-image-uri=i "
     "--frobnicate=1", "--frobnicate"),
    ("gcloud ai custom-jobs create --worker-pool-spec=container-image-uri=i", "--worker-pool-spec[0].machine-type"),
    ("gcloud ai-platform jobs submit training x", "source"),
    ("gcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,container-image-uri=i "
     "--enable-web-access=false", "--enable-web-access"),
    ("gcloud ai custom-jobs create --args='unclosed", "source"),
])
def test_bad_gcloud_commands(client, command, field):
    assert_problem(client.post("/v1/templates:import", json={"format": "gcloud", "source": command}), 422, field)


def test_worker_pool_specs_with_an_empty_middle_pool(client):
    r = client.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": [
        "machine-type=n1-standard-4,container-image-uri=img:1", "",
        "machine-type=n1-highmem-8,replica-count=2,container-image-uri=img:1"]})
    assert r.status_code == 200, r.text
    spec = r.json()["spec"]
    assert "workers" not in spec and spec["parameter_servers"]["replica_count"] == 2
    assert spec["distribution"] == "parameter_server"
    empty_chief = client.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": [""]})
    assert_problem(empty_chief, 422, "pools[0]")
    pool = "machine-type=n1-standard-4,container-image-uri=i"
    five = client.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": [pool] * 5})
    assert_problem(five, 422, "source[4]")
    wrong_shape = client.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": "x"})
    assert_problem(wrong_shape, 422, "source")
