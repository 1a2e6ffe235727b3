# The local backend's fixtures: logs tests run real local jobs.
from tests.backends.conftest import make_client, token, work_dir  # noqa: F401
