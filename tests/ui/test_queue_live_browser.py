"""Issue 49.6, in a real headless Chromium against the real service (no controller: jobs stay as
the test writes them): the Queue page and a waiting job's "In the queue" follow the queue while
shown, without a reload; the first page sums up your team's waiting jobs with a jump to each;
paging goes both ways."""
from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.backends.localkit import settings_for
from tests.capacity.queuekit import shape
from tests.ui.test_browser import sign_in, wait
from tests.ui.test_walk_browser import queue_scene  # noqa: F401 (a fixture)

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def ui_settings(db_url, work_dir):  # noqa: F811
    # No controller; the queue computed on every read (so the page reads itself every second); two
    # jobs a page, so paging shows.
    return settings_for(db_url, work_dir, local_max_running_jobs=8, run_reconciler=False, queue_cache_seconds=0,
                        ui_stream_interval_seconds=0.2, ui_stream_max_seconds=1.0, ui_page_size=2)


def test_the_queue_page_follows_the_queue_and_sums_up_your_jobs(make_browser, queue_scene, live_api,  # noqa: F811
                                                                 tokens, db_url):
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/queue")
    summary = d.find_element(By.ID, "mine-local")
    links = {a.get_attribute("href").rsplit("/", 1)[-1] for a in summary.find_elements(By.CSS_SELECTOR, "li > a")}
    assert {queue_scene["a1"], queue_scene["a2"]} <= links, summary.text
    assert "position" in summary.text and "likely start" in summary.text and "at the latest" in summary.text
    # A job beyond the first page: its line jumps to its page.
    assert summary.find_elements(By.PARTIAL_LINK_TEXT, "its page"), summary.text
    d.execute_script("document.body.dataset.marker = 'not reloaded'")

    body = {"display_name": "alice-late"}
    late = live_api.submit("tiny", **body)["id"]
    shape(db_url, late, demand={"core": 1})
    wait(d, lambda drv: late in drv.find_element(By.ID, "mine-local").get_attribute("innerHTML"),
         "the new job in the summary, without a reload")
    assert d.execute_script("return document.body.dataset.marker") == "not reloaded"


def test_a_waiting_jobs_place_follows_and_goes_when_it_launches(make_browser, queue_scene, tokens, db_url):  # noqa: F811
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + f"/ui/jobs/{queue_scene['a2']}")
    assert "position" in d.find_element(By.ID, "queue-place").text
    shape(db_url, queue_scene["a2"], demand={"core": 1}, running=True)       # it launched
    wait(d, lambda drv: not drv.find_elements(By.ID, "queue-place"), "the place to go once the job launched")


def test_paging_goes_both_ways(make_browser, queue_scene, tokens):  # noqa: F811
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/queue?backend=local")
    d.find_element(By.CSS_SELECTOR, 'a[rel="next"]').click()
    wait(d, lambda drv: "offset=2" in drv.current_url, "the second page")
    d.find_element(By.CSS_SELECTOR, 'a[rel="prev"]').click()
    wait(d, lambda drv: "offset=0" in drv.current_url, "back to the first page")
    assert d.find_elements(By.ID, "mine-local")


def test_below_720_px_a_waiting_jobs_parts_read_within_the_screen(make_browser, queue_scene, tokens):  # noqa: F811
    """Issue 52.4: the row under each waiting job that gives its priority in parts is shown on a
    narrow screen and wraps within it, however wide the table scrolls."""
    d = make_browser(width=700, height=900)
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/queue")
    row = d.find_element(By.XPATH, f'//a[@href="/ui/jobs/{queue_scene["a1"]}"]/ancestor::tr/following-sibling::tr[1]')
    assert row.get_attribute("class") == "factors-row"
    parts = row.find_element(By.CSS_SELECTOR, ".factors")
    assert parts.is_displayed() and "tier nominal" in parts.text and "fair share #1" in parts.text, parts.text
    box = d.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right, window.innerWidth]",
                           parts)
    assert 0 <= box[0] and box[1] <= box[2], box
