from tests.api.conftest import assert_problem, client, demo, settings, tokens  # noqa: F401
