from tests.cost.conftest import client, demo, settings, tokens  # noqa: F401 (fixtures)
