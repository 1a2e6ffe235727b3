import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings
from service.demo import demo_template

DEMO = demo_template().model_dump(mode="json", exclude_none=True)


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    # The local backend with room for no running job: jobs are stored and queued,
    # never launched, so these tests exercise the API alone.
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)


@pytest.fixture
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture
def demo(client) -> dict:
    r = client.post("/v1/templates", json=DEMO)
    assert r.status_code == 201, r.text
    return r.json()


def assert_problem(r, status: int, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    if field is not None:
        fields = [e["field"] for e in body.get("errors", [])]
        assert field in fields, f"{field} not in {fields}"
    return body
