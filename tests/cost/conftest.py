from pathlib import Path

import pytest

TEST_PRICES = Path(__file__).with_name("prices-test.json")


@pytest.fixture
def settings(settings):
    """The API tests' settings (tests/api/conftest.py) with the test price table."""
    return settings.model_copy(update={"price_file": TEST_PRICES, "cost_region": "us-central1"})
