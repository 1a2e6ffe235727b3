import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.core.config import Settings
from service.demo import demo_template
from tests.conftest import bearer, make_token

DEMO = demo_template().model_dump(mode="json", exclude_none=True)


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    # The local backend with room for no running job: jobs are stored and queued,
    # never launched, so these tests exercise the API alone.
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)


@pytest.fixture
def tokens(db_url) -> dict[str, str]:
    """Team alpha: one token per role."""
    return {role: make_token(db_url, "alpha", role) for role in ("viewer", "member", "admin")}


@pytest.fixture
def client(settings, tokens):
    """Speaks as team alpha's admin unless a test passes other headers."""
    with TestClient(create_app(settings), headers=bearer(tokens["admin"])) as c:
        yield c


@pytest.fixture
def demo(client) -> dict:
    r = client.post("/v1/templates", json=DEMO)
    assert r.status_code == 201, r.text
    return r.json()


def assert_problem(r, status: int, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    if field is not None:
        fields = [e["field"] for e in body.get("errors", [])]
        assert field in fields, f"{field} not in {fields}"
    return body


@pytest.fixture
def live_server(settings, tokens):
    """The real app on a real uvicorn server on 127.0.0.1, in a thread."""
    import socket
    import threading
    import time

    import uvicorn

    from service.web.protocol import uvicorn_options

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # With the request-head limits `trainjobs serve` runs with.
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False, **uvicorn_options(settings)))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.fixture
def demo_live(live_server, tokens) -> dict:
    import httpx
    r = httpx.post(f"{live_server}/v1/templates", json=DEMO, headers=bearer(tokens["admin"]))
    assert r.status_code == 201, r.text
    return r.json()
