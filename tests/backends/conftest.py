import pytest

from tests.backends.localkit import Api, kill_all, settings_for
from tests.conftest import make_token


@pytest.fixture
def work_dir(tmp_path):
    path = tmp_path / "runs"
    yield path
    kill_all(path)  # a failed test must not leave replicas behind


@pytest.fixture
def token(db_url) -> str:
    return make_token(db_url, "alpha", "admin")


@pytest.fixture
def make_client(api_client, db_url, work_dir, token):
    """make_client(**settings) -> Api over a TestClient whose lifespan (backend,
    reconciler thread) runs until the test ends."""
    clients = []

    def make(**overrides) -> Api:
        settings = settings_for(db_url, work_dir, **overrides)
        client = api_client(settings, token)
        clients.append(client)
        return Api(client)
    yield make
    for c in reversed(clients):
        c.__exit__(None, None, None)
