import pytest

from tests.trainer.helpers import Replicas


@pytest.fixture
def replicas(tmp_path):
    """Starts trainer replicas as subprocesses; any still running at the end are killed."""
    r = Replicas(tmp_path)
    yield r
    r.kill_all()
