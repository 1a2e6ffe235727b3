import pytest
from pydantic import SecretStr

from tests.cost.conftest import TEST_PRICES


@pytest.fixture
def settings(settings):
    """The API tests' settings (tests/api/conftest.py: jobs stay QUEUED) with the test price table."""
    return settings.model_copy(update={"price_file": TEST_PRICES, "cost_region": "us-central1",
                                       "metrics_token": SecretStr("metrics-secret")})
