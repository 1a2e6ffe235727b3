"""The job page shows a job's placement wish (issue 52.2's view, its UI part): what it prefers, its
start_by (in the browser's time zone) and its price per hour on each backend it accepts, in a real
headless Chromium against the real service and controller, the sim under two names."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from selenium.webdriver.common.by import By

from tests.backends.sim.conftest import cohorts  # noqa: F401 (a fixture)
from tests.backends.sim.simkit import settings
from tests.ui.test_browser import sign_in, wait

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def ui_settings(db_url, cohorts):  # noqa: F811
    return settings(db_url, backends=cohorts, default_backend="sim1", capacity={"sim1": {"core": 2}, "sim2": {"core": 2}},
                    placement_prices={"sim1": {"core": 1.0}, "sim2": {"core": 0.1}}, ui_stream_interval_seconds=0.2,
                    ui_stream_max_seconds=1.0)


def _template(api, name: str, **spec) -> None:
    api.template(name, {"container": {"image_uri": "trainer:1", "command": ["python", "-m", "trainer.task"]},
                        "chief": {}, "labels": {"sim-duration-seconds": "3600"}, **spec})


def test_the_job_page_shows_the_wish_and_the_prices(make_browser, live_api, tokens):
    _template(live_api, "thrifty", backends=["sim1", "sim2"], placement={"prefer": "cheapest", "start_by": 7200})
    _template(live_api, "plain", backends=["sim1", "sim2"])
    before = datetime.now(UTC)
    job = live_api.c.post("/v1/jobs", json={"template": "thrifty"}).json()
    plain = live_api.c.post("/v1/jobs", json={"template": "plain"}).json()
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + f"/ui/jobs/{job['id']}")
    shown = wait(d, lambda drv: drv.find_element(By.ID, "job-wish"), "the wish")
    text = shown.text
    assert text.startswith("cheapest: the lowest price per hour; start by "), text
    assert "Price per hour: sim1 1.00/h, sim2 0.10/h" in text, text
    at = datetime.fromisoformat(shown.find_element(By.TAG_NAME, "time").get_attribute("datetime").replace("Z", "+00:00"))
    assert before + timedelta(seconds=7100) < at < datetime.now(UTC) + timedelta(seconds=7300)
    # A job of the listed order with no deadline wishes nothing: no line.
    d.get(d.base_url + f"/ui/jobs/{plain['id']}")
    wait(d, lambda drv: drv.find_element(By.ID, "job-backend"), "the plain job's page")
    assert not d.find_elements(By.ID, "job-wish")


def test_the_job_page_shows_its_place_in_each_queue(make_browser, live_api, tokens):
    """A job of several backends waits in each one's queue: its page says where it stands in each."""
    _template(live_api, "plain", backends=["sim1", "sim2"])
    for name in ("sim1", "sim1", "sim2", "sim2"):   # every core of both taken
        blocker = live_api.c.post("/v1/jobs", json={"template": "plain", "backend": name}).json()
        live_api.wait_state(blocker["id"], "RUNNING")
    job = live_api.c.post("/v1/jobs", json={"template": "plain"}).json()
    d = make_browser()
    sign_in(d, tokens["viewer"])

    loaded = [0.0]

    def both_placed(drv):
        if time.monotonic() - loaded[0] > 0.5:   # the page anew twice a second: the queue is computed apart
            drv.get(drv.base_url + f"/ui/jobs/{job['id']}")
            loaded[0] = time.monotonic()
        lines = {e.get_attribute("data-backend"): e.text for e in drv.find_elements(By.CSS_SELECTOR, "#queue-places .queue-on")}
        return lines if len(lines) == 2 and all("position 1" in t for t in lines.values()) else None
    lines = wait(d, both_placed, "the job's place in both queues")
    assert list(lines) == ["sim1", "sim2"], lines
    assert lines["sim2"].startswith("sim2: position 1, likely start"), lines
