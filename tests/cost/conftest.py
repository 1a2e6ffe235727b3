from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings
from tests.api.conftest import DEMO
from tests.conftest import bearer, make_token

TEST_PRICES = Path(__file__).with_name("prices-test.json")


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    """As the API tests' (jobs stay QUEUED: no launch), with the test price table."""
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False,
                    price_file=TEST_PRICES, cost_region="us-central1", metrics_token="metrics-secret")


@pytest.fixture
def tokens(db_url) -> dict[str, str]:
    return {role: make_token(db_url, "alpha", role) for role in ("viewer", "member", "admin")}


@pytest.fixture
def client(settings, tokens):
    with TestClient(create_app(settings), headers=bearer(tokens["admin"])) as c:
        yield c


@pytest.fixture
def demo(client) -> dict:
    r = client.post("/v1/templates", json=DEMO)
    assert r.status_code == 201, r.text
    return r.json()
