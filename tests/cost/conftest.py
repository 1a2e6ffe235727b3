from pathlib import Path

import pytest

from service.slices import Settings
from tests.apikit import client, demo, tokens  # noqa: F401 (fixtures: they use `settings` below)

TEST_PRICES = Path(__file__).with_name("prices-test.json")


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    """As the API tests' (jobs stay QUEUED: no launch), with the test price table."""
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False,
                    price_file=TEST_PRICES, cost_region="us-central1", metrics_token="metrics-secret")
