"""The API fixtures every test folder sees (registered as a plugin by tests/conftest.py):
`api_client(settings)` builds and starts the app, and the usual team alpha setup on top."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.demo import demo_template
from service.slices import Settings
from tests.conftest import bearer, make_tokens
from tests.waiting import wait_for

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
    return make_tokens(db_url, "alpha", ("viewer", "member", "admin"))


class ApiClient(TestClient):
    """A TestClient whose app is running (its lifespan started) from the moment it is made.

    `with` around it is allowed and ends the app at the block's end, as the tests did when
    they built their own; entering it again does not start a second lifespan."""

    running = False

    def __enter__(self) -> ApiClient:
        if not self.running:
            super().__enter__()
            self.running = True
        return self

    def __exit__(self, *exc) -> None:
        if self.running:
            self.running = False
            super().__exit__(*exc)


@pytest.fixture
def api_client() -> Iterator[Callable[..., ApiClient]]:
    """api_client(settings, token=None, *, backends=None, **client_options) -> a running ApiClient.

    One app per call (create_app(settings, backends=...)), speaking with `token` as its bearer
    unless headers are given; client_options go to the TestClient (base_url, headers, ...).
    Every client still open at teardown is stopped: its lifespan ends, which stops the app's
    threads and disposes its engines, so no test leaves a controller or a pool behind. That
    teardown comes after the teardown of fixtures set up later (tmp_path, work folders):
    a fixture that hands out clients stops its own first (`with`, or __exit__ in its teardown)."""
    made: list[ApiClient] = []

    def make(settings: Settings, token: str | None = None, *, backends=None, **options) -> ApiClient:
        if token is not None:
            options["headers"] = {**bearer(token), **options.get("headers", {})}
        client = ApiClient(create_app(settings, backends=backends), **options)
        made.append(client)
        return client.__enter__()

    yield make
    for client in reversed(made):
        client.__exit__(None, None, None)
        client.close()


@pytest.fixture
def client(api_client, settings, tokens):
    """Speaks as team alpha's admin unless a test passes other headers."""
    # Stopped here, before the fixtures it uses are torn down (api_client's own teardown,
    # which comes later, only catches clients nobody stopped).
    with api_client(settings, tokens["admin"]) as c:
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
    wait_for(lambda: server.started, "the server to start", 30, 0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.fixture
def demo_live(live_server, tokens) -> dict:
    import httpx
    r = httpx.post(f"{live_server}/v1/templates", json=DEMO, headers=bearer(tokens["admin"]))
    assert r.status_code == 201, r.text
    return r.json()
