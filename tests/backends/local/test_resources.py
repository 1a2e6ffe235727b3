"""Issue 26, point 7: on the local backend the Vertex names of a template mean what they can:
the TensorBoard folder (and the command serving it) is the one the replica really got as
AIP_TENSORBOARD_LOG_DIR, the model folder (AIP_MODEL_DIR) is shown as the upload candidate, and
what is Vertex AI only says so. A real local job (programs/replica.py) dumps its environment."""
from __future__ import annotations

import json

from tests.backends.localkit import spec

TB = "projects/test-project/locations/us-central1/tensorboards/7"
SERVE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


def test_local_view_of_the_vertex_names(make_client, tmp_path):
    api = make_client()
    dump = tmp_path / "env"
    dump.mkdir()
    dump.chmod(0o777)  # the replicas, unprivileged uids when the tests run as root, write here
    s = spec(["--dump-env", str(dump)], base_output=None)
    s.update(tensorboard=TB, persistent_resource_id="warm-pool", experiment="mnist", experiment_run="r-{job_id}",
             model_upload={"serving_container_image_uri": SERVE, "display_name": "mnist-cnn"})
    api.template("vertexy", s)
    job = api.submit("vertexy")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    env = json.loads((dump / "workerpool0-0.json").read_text())
    res = done["resources"]

    tb = res["tensorboard"]
    assert tb["log_dir"] == env["AIP_TENSORBOARD_LOG_DIR"]
    assert tb["command"] == f"tensorboard --logdir {env['AIP_TENSORBOARD_LOG_DIR']}"
    assert tb["name"] == TB and tb["vertex_only"] is True and "Vertex AI only" in tb["note"]

    model = res["model_upload"]
    assert model["artifact_uri"] == env["AIP_MODEL_DIR"] and model["candidate"] is True
    assert model["vertex_only"] is True and "nothing is uploaded" in model["note"]
    assert model["serving_container_image_uri"] == SERVE and "state" not in model

    for key in ("persistent_resource", "experiment", "experiment_run"):
        assert res[key]["vertex_only"] is True and "Vertex AI only" in res[key]["note"], key
    # Nothing of Vertex's was called for: no upload row, no upload event.
    assert not [e for e in api.events(job["id"]) if e["actor"] == "model-upload"]


def test_every_local_job_shows_its_tensorboard_folder_and_model_candidate(make_client):
    api = make_client()
    api.template("plain", spec([]))
    r = api.c.post("/v1/jobs?dry_run=true", json={"template": "plain", "backend": "local"})
    assert r.status_code == 200, r.text
    res = r.json()["resources"]
    assert res["tensorboard"]["log_dir"].endswith("/output/logs/") and "vertex_only" not in res["tensorboard"]
    assert res["model_upload"]["artifact_uri"].endswith("/output/model/")
    assert set(res) == {"tensorboard", "model_upload"}
