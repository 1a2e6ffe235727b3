"""The client's import and export against the real service (SQLite and PostgreSQL)."""
from __future__ import annotations

import pytest
import yaml

from tests.conftest import ONE_DATABASE
from trainjobs_client import AsyncClient, InvalidRequest

pytestmark = ONE_DATABASE

CONFIG = ("trainingInput:\n  scaleTier: CUSTOM\n  masterType: standard\n  masterConfig: {imageUri: 'img:1'}\n"
          "  workerType: n1-standard-4\n  workerCount: 2\n  useChiefInTfConfig: true\n")


def test_import_then_export(tj):
    converted = tj.templates.import_source(CONFIG)
    assert converted.template is None and converted.spec["workers"]["replica_count"] == 2
    assert [w.field for w in converted.warnings] == ["trainingInput.masterType"]  # standard -> n1-standard-4
    stored = tj.templates.import_source(CONFIG, name="legacy", description="from AI Platform")
    assert stored.template.name == "legacy" and tj.templates.get("legacy").description == "from AI Platform"
    command = tj.templates.export("legacy")
    assert "--worker-pool-spec=machine-type=n1-standard-4,replica-count=2,container-image-uri=img:1" in command
    config = yaml.safe_load(tj.templates.export("legacy", "config", version=1))
    assert [p["replicaCount"] for p in config["workerPoolSpecs"]] == [1, 2]
    job = tj.submit("legacy")
    assert "gcloud ai custom-jobs create" in tj.export(job)
    assert "aiplatform.CustomJob(" in tj.export(job.id, "sdk")
    with pytest.raises(InvalidRequest) as bad:
        tj.templates.import_source(["machine-type=n1-standard-4"], "worker-pool-specs")
    assert bad.value.errors[0].field == "source[0].container-image-uri"


@pytest.mark.anyio
async def test_async_client_imports_and_exports(server, token):
    async with AsyncClient(server, token, backoff=0.01) as c:
        out = await c.templates.import_source(
            ["machine-type=n1-standard-4,container-image-uri=img:1"], "worker-pool-specs", name="one")
        assert out.template.version == 1
        text = await c.templates.export("one", "gcloud")
        assert "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,container-image-uri=img:1" in text
