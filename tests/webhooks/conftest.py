import uuid

import pytest
from fastapi.testclient import TestClient

from service.slices import Settings
from tests.backends.localkit import kill_all, settings_for, spec
from tests.conftest import make_token
from tests.waiting import wait_for
from tests.webhooks.receiver import Receiver

LOOPBACK = ["127.0.0.1/32"]


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


@pytest.fixture
def work_dir(tmp_path):
    path = tmp_path / "runs"
    yield path
    kill_all(path)


@pytest.fixture
def tokens(db_url) -> dict[str, str]:
    return {role: make_token(db_url, "alpha", role) for role in ("viewer", "member", "admin")}


def hook_settings(db_url: str, work_dir, **overrides) -> Settings:
    """The local backend running real (tiny) replicas, the controller and its webhook
    dispatcher in threads, retries fast, and 127.0.0.1 allowed as a destination."""
    values = dict(webhook_allowed_networks=LOOPBACK, webhook_dispatch_interval_seconds=0.05,
                  webhook_retry_initial_seconds=0.2, webhook_retry_jitter=0.0,
                  public_url="https://trainjobs.example.com")
    values.update(overrides)
    return settings_for(db_url, work_dir, **values)


@pytest.fixture
def make_client(api_client, db_url, work_dir, tokens):
    clients = []

    def make(**overrides) -> TestClient:
        client = api_client(hook_settings(db_url, work_dir, **overrides), tokens["admin"])
        clients.append(client)
        return client
    yield make
    for c in reversed(clients):
        c.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client()


QUICK = {"name": "quick", "spec": spec(["--lines", "1"])}
FAILING = {"name": "failing", "spec": spec(["--exit", "3", "--message", "loss is NaN"])}


def add_template(client, template: dict) -> None:
    r = client.post("/v1/templates", json=template)
    assert r.status_code == 201, r.text


def subscribe(client, url: str, **body) -> dict:
    r = client.post("/v1/webhooks", json={"url": url, **body})
    assert r.status_code == 201, r.text
    return r.json()


def wait_delivery(client, webhook_id: str, status: str = "delivered", n: int = 1) -> list[dict]:
    """The webhook's log once `n` deliveries have `status` (newest first)."""
    def done():
        items = client.get(f"/v1/webhooks/{webhook_id}/deliveries").json()["items"]
        return items if sum(d["status"] == status for d in items) >= n else None
    return wait_for(done, f"{n} {status} deliveries of webhook {webhook_id}")


def wait_job(client, job_id: str, *states: str) -> dict:
    return wait_for(lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] in states and j,
                    f"job {job_id} to reach {states}")


def new_id() -> str:
    return str(uuid.uuid4())
