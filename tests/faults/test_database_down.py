"""Database down: 503 with a clear message, and recovery by itself when it is back."""

import pytest

from service.slices import Settings
from tests.apikit import DEMO, assert_problem
from tests.conftest import make_token
from tests.faults.tcp_proxy import TcpProxy
from tests.waiting import wait_for


@pytest.fixture
def proxied(pg_database, tmp_path):
    from tests.conftest import truncate_all
    truncate_all(pg_database)
    proxy = TcpProxy("127.0.0.1", 5432)
    url = pg_database.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    assert url != pg_database
    yield proxy, url
    proxy.close()


def test_database_cut_mid_request_is_503_then_recovers(api_client, proxied, tmp_path):
    proxy, url = proxied
    token = make_token(url, "alpha", "admin")
    settings = Settings(database_url=url, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)
    with api_client(settings, token) as client:
        assert client.post("/v1/templates", json=DEMO).status_code == 201
        assert client.get("/v1/jobs").status_code == 200

        proxy.cut()  # the pooled connection dies under the next request
        body = assert_problem(client.get("/v1/jobs"), 503)
        assert "database did not answer" in body["detail"]
        r = client.post("/v1/jobs", json={"template": "mwms-demo"})
        assert_problem(r, 503)
        assert r.headers["retry-after"] == "5"
        assert client.get("/readyz").status_code == 503
        assert client.get("/healthz").status_code == 200

        proxy.restore()
        wait_for(lambda: client.get("/readyz").status_code == 200, "/readyz to recover", 20, 0.2)
        assert client.get("/v1/jobs").status_code == 200
        job = client.post("/v1/jobs", json={"template": "mwms-demo"})
        assert job.status_code == 201
        # The submit refused during the outage left nothing behind.
        assert [j["id"] for j in client.get("/v1/jobs").json()["items"]] == [job.json()["id"]]


def test_controller_steps_down_in_an_outage_and_comes_back(api_client, proxied, tmp_path, caplog):
    proxy, url = proxied
    settings = Settings(database_url=url, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, reconcile_interval_seconds=0.05, seed_demo_template=False,
                        election_interval_seconds=0.5)
    with api_client(settings) as client:
        controller = client.app.state.services.controller
        # Each phase has its own bound: a loaded machine slows one without eating the next's.
        wait_for(lambda: controller.ticks >= 3, "the controller to start")
        first_epoch = controller.epoch
        proxy.cut()
        # Its lock lives on a connection through the proxy: losing it means stepping down.
        wait_for(lambda: not controller.active, "the controller to step down")
        assert client.get("/healthz").status_code == 200
        proxy.restore()
        wait_for(lambda: controller.active, "the controller to come back")
        assert controller.epoch > first_epoch  # a new term: writes of the old one are fenced off
        # The cut ended the old lock session at the server too: no lease had to be broken.
        assert "terminating it to take over" not in caplog.text
        ticks = controller.ticks
        wait_for(lambda: controller.ticks >= ticks + 3, "the loops to resume")
        assert controller._thread.is_alive()
        assert "trainjobs_reconcile_ticks_total" in client.get("/metrics").text


def test_the_controller_comes_back_even_if_the_server_keeps_its_old_session(api_client, proxied, tmp_path, caplog):
    """The client's side of every connection ends, the server's stays open (a half-open
    path): PostgreSQL keeps the old lock session, and its lock. The controller must
    come back all the same, by breaking its own stale lease (issue 23: the suite's
    proxy once did this by accident, and the controller never came back)."""
    proxy, url = proxied
    settings = Settings(database_url=url, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, reconcile_interval_seconds=0.05, seed_demo_template=False,
                        election_interval_seconds=0.5, controller_lease_seconds=3)
    with api_client(settings) as client:
        controller = client.app.state.services.controller
        wait_for(lambda: controller.ticks >= 3, "the controller to start")
        first_epoch = controller.epoch
        proxy.cut(server_side=False)
        wait_for(lambda: not controller.active, "the controller to step down")
        proxy.restore()
        wait_for(lambda: controller.active, "the controller to come back")
        assert controller.epoch > first_epoch
        assert "terminating it to take over" in caplog.text   # the stale session, by its lease


def test_ui_pages_say_the_database_is_down_then_recover(api_client, proxied, tmp_path):
    """The UI's pages answer the same outage with a 503 page (and Retry-After), not a 500;
    the UI tells it apart through service.web.database_errors, as the API does."""
    from tests.ui.conftest import sign_in

    proxy, url = proxied
    token = make_token(url, "alpha", "admin")
    settings = Settings(database_url=url, backends=["local"], local_work_dir=tmp_path / "runs",
                        local_max_running_jobs=0, run_reconciler=False, seed_demo_template=False)
    with api_client(settings, token) as client:
        sign_in(client, token)
        assert client.get("/ui/jobs").status_code == 200

        proxy.cut()  # the pooled connection dies under the next page
        page = client.get("/ui/jobs", headers={"Accept": "text/html"})
        assert page.status_code == 503, page.text[-2000:]
        assert "Database unavailable" in page.text and "retry in a few seconds" in page.text
        assert page.headers["retry-after"] == "5"
        assert page.headers["content-type"].startswith("text/html")

        proxy.restore()
        wait_for(lambda: client.get("/ui/jobs").status_code == 200, "the jobs page to recover", 20, 0.2)
