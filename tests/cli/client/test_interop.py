"""`trainjobs templates import|export` and `trainjobs jobs export` as real subprocesses
against a real service (SQLite and PostgreSQL)."""
from __future__ import annotations

import json

import yaml

from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE

CONFIG = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: complex_model_s
  masterConfig: {imageUri: "gcr.io/p/trainer:3"}
  workerType: n1-highcpu-8
  workerCount: 2
  args: ["--epochs", "4", "--name=a b,c"]
  region: europe-west4
"""


def test_import_shows_then_stores_and_exports(cli, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    shown = cli("templates", "import", str(path))
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout)["spec"]["chief"]["machine_type"] == "n1-highcpu-8"
    assert "trainingInput.masterType" in shown.stderr and "trainingInput.region" in shown.stderr
    assert "not stored" in shown.stderr
    assert json.loads(cli("templates", "list", "-o", "json").stdout) == []

    stored = cli("templates", "import", str(path), "--name", "legacy", "-o", "json")
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout)["template"]["version"] == 1

    command = cli("templates", "export", "legacy")
    assert command.returncode == 0, command.stderr
    assert "--args=^;^--epochs;4;--name=a b,c" in command.stdout.replace("'", "")
    # The exported command imports back (stdin, format detected) to the same spec.
    back = cli("templates", "import", "-", "-o", "json", input=command.stdout)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["spec"] == json.loads(stored.stdout)["spec"]

    job = json.loads(cli("jobs", "submit", "legacy", "--set", "scheduling.timeout_seconds=600", "-o", "json").stdout)
    # A timeout has no gcloud flag: the export writes a --config file first, and the whole text
    # imports back (format detected).
    exported = cli("jobs", "export", job["id"])
    assert exported.returncode == 0 and "--config=" in exported.stdout
    from_job = cli("templates", "import", "-", "-o", "json", input=exported.stdout)
    assert from_job.returncode == 0, from_job.stderr
    from_job = json.loads(from_job.stdout)["spec"]
    assert from_job["scheduling"]["timeout_seconds"] == 600
    assert from_job["workers"] == json.loads(stored.stdout)["spec"]["workers"]
    sdk = cli("jobs", "export", job["id"], "--format", "sdk")
    assert sdk.returncode == 0 and "aiplatform.CustomJob(" in sdk.stdout
    compile(sdk.stdout, "sdk", "exec")
    config = cli("jobs", "export", job["id"], "--format", "config", "-o", "json")
    assert yaml.safe_load(json.loads(config.stdout)["text"])["workerPoolSpecs"][1]["replicaCount"] == 2


def test_pool_spec_lines_and_refusals(cli, tmp_path):
    specs = tmp_path / "pools.txt"
    specs.write_text("machine-type=n1-standard-4,container-image-uri=img:1\n\n"
                     "machine-type=n1-highmem-8,replica-count=2,container-image-uri=img:1\n\n")
    out = cli("templates", "import", str(specs), "--format", "worker-pool-specs", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["spec"]["parameter_servers"]["replica_count"] == 2

    bad = tmp_path / "bad.yaml"
    bad.write_text("scaleTier: BASIC_TPU\nmasterConfig: {imageUri: i}\n")
    refused = cli("templates", "import", str(bad))
    assert refused.returncode == 2 and "scaleTier" in refused.stderr and "TPU" in refused.stderr
    assert cli("jobs", "export", "not-an-id").returncode == 2
    missing = cli("templates", "export", "nope")
    assert missing.returncode == 2 and "404" in missing.stderr
