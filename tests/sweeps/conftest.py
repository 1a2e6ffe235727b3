# The API tests' fixtures (a TestClient whose controller runs only when a test calls
# run_once) and the local backend's (a client over real replica processes).
from tests.apikit import client, settings, tokens  # noqa: F401
from tests.backends.conftest import make_client, token, work_dir  # noqa: F401
