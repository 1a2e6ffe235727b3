"""A job launched on Vertex (the fake of Google's API on 127.0.0.1) exports as exactly
the CustomJob Vertex received, the backend's defaults included (SQLite and PostgreSQL)."""
from __future__ import annotations

import re

import yaml

from tests.conftest import ONE_DATABASE
from tests.fakes.harness import (  # noqa: F401
    LOCATION,
    PROJECT,
    fake_logging,
    fake_vertex,
    make_harness,
)

pytestmark = ONE_DATABASE


def test_export_is_what_vertex_received(make_harness, fake_vertex):  # noqa: F811
    sa = "trainer@test-project.iam.gserviceaccount.com"
    with make_harness(vertex_base_output_directory="gs://bucket/runs/", vertex_service_account=sa) as h:
        job = h.submit()
        [sent] = fake_vertex.find(job["id"])
        config = yaml.safe_load(h.client.get(f"/v1/jobs/{job['id']}/export?format=config").text)
        for pool in sent["jobSpec"]["workerPoolSpecs"]:
            pool["replicaCount"] = int(pool["replicaCount"])
        assert config == sent["jobSpec"]
        assert config["baseOutputDirectory"] == {"outputUriPrefix": f"gs://bucket/runs/{job['id']}"}
        command = h.client.get(f"/v1/jobs/{job['id']}/export").text
        assert f"--region={LOCATION}" in command and f"--project={PROJECT}" in command
        written = yaml.safe_load(re.search(r"<<'(\w+)'\n(.*?)\n\1\n", command, re.S).group(2))
        assert written == config
        labels = {k: v for k, v in sent["labels"].items() if not k.startswith("trainjobs")}
        assert "--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()) in command
        sdk = h.client.get(f"/v1/jobs/{job['id']}/export?format=sdk").text
        assert f"service_account={sa!r}" in sdk and f"base_output_dir='gs://bucket/runs/{job['id']}'" in sdk
