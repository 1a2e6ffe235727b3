from tests.apikit import assert_problem, client, demo, settings, tokens  # noqa: F401
