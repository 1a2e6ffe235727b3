"""Issue 49, from a real-browser walk of the Queue page and of preempted jobs: each point in a real
headless Chromium against the real service (no controller: the jobs stay as the test writes them,
as the engine and the controller would leave them)."""
from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.backends.localkit import settings_for
from tests.capacity.queuekit import set_capacity, set_share, shape
from tests.ui.conftest import template_body
from tests.ui.test_browser import sign_in, wait
from tests.ui.walkkit import add_class, fail, preempt

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def ui_settings(db_url, work_dir):  # noqa: F811
    # No controller: jobs stay as written; the queue computed on every read; launch slots to spare.
    return settings_for(db_url, work_dir, local_max_running_jobs=8, run_reconciler=False, queue_cache_seconds=0,
                        ui_stream_interval_seconds=0.2, ui_stream_max_seconds=1.0)


def text_of(driver, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def badge(driver, job_id: str):
    return driver.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{job_id}"] .state-cell .state')


# --- point 3: a preempted attempt is not a failure to the eye ---------------------------------

def test_a_preempted_attempt_shows_as_preempted_and_links_the_attempt_that_goes_on(make_browser, live_api, tokens,
                                                                                   db_url):
    body = template_body("tiny")
    live_api.template("tiny", body["spec"], parameters=body["parameters"])
    first = live_api.submit("tiny", display_name="trial-7")["id"]
    second = live_api.submit("tiny", display_name="trial-7")["id"]
    broken = live_api.submit("tiny", display_name="broken")["id"]
    later = live_api.submit("tiny", display_name="trial-8")["id"]
    preempt(db_url, first, second)
    fail(db_url, broken)

    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/jobs")
    # The preempted attempt: its own badge and word, not a red FAILED; a real failure stays FAILED.
    b = badge(d, first)
    assert b.text.strip().endswith("PREEMPTED") and "state-PREEMPTED" in b.get_attribute("class")
    assert "FAILED" not in b.text and "state-FAILED" not in b.get_attribute("class")
    assert badge(d, broken).text.strip().endswith("FAILED")
    assert "attempt 2" in text_of(d, f'tr[data-job-id="{second}"] .state-cell')
    # Its colour is not the failure's colour either.
    colour = d.execute_script("return getComputedStyle(arguments[0]).color", b)
    assert colour != d.execute_script("return getComputedStyle(arguments[0]).color", badge(d, broken))

    # A job preempted while the list is open turns PREEMPTED in place (the live feed).
    live_next = live_api.submit("tiny", display_name="trial-8b")["id"]
    d.get(d.base_url + "/ui/jobs")
    wait(d, lambda d: d.find_element(By.ID, "jobs").get_attribute("data-live") == "open", "the live feed")
    preempt(db_url, later, live_next, second_state="RUNNING")
    wait(d, lambda d: badge(d, later).text.strip().endswith("PREEMPTED"), "the live PREEMPTED badge")

    # The attempt's page: attempt 1 of 2 near the top, no red Error box, the attempt that goes on linked.
    d.get(d.base_url + f"/ui/jobs/{first}")
    assert "Attempt 1 of 2" in text_of(d, "#attempt-line")
    assert not d.find_elements(By.ID, "job-error")
    note = text_of(d, "#job-preempted")
    assert "Preempted" in note and "team beta takes back its nominal quota" in note and "Attempt 2" in note
    assert text_of(d, "#job-state").strip().endswith("PREEMPTED")
    d.find_element(By.ID, "next-attempt").click()
    wait(d, lambda d: d.current_url.endswith(f"/ui/jobs/{second}"), "attempt 2's page")
    assert "Attempt 2 of 2" in text_of(d, "#attempt-line")
    d.find_element(By.ID, "previous-attempt").click()
    wait(d, lambda d: d.current_url.endswith(f"/ui/jobs/{first}"), "back on attempt 1's page")
    # A real failure keeps its red box.
    d.get(d.base_url + f"/ui/jobs/{broken}")
    assert d.find_elements(By.ID, "job-error") and not d.find_elements(By.ID, "attempt-line")


# --- point 5: priority classes visible ----------------------------------------------------------

def pick_template(live_api, name: str, *, open_class: bool) -> None:
    body = template_body(name)
    spec = {**body["spec"], "priority_class": "batch"}
    if open_class:
        spec["overridable"] = ["workers.replica_count", "priority_class"]
    live_api.template(name, spec, parameters=body["parameters"])


def test_priority_classes_on_the_form_template_preview_job_and_queue(make_browser, live_api, tokens, db_url):
    add_class(db_url, "urgent", 100, "deadline work", teams=["alpha"], preempts=True)
    add_class(db_url, "batch", 10, "nightly work that may wait")
    add_class(db_url, "vip", 200, "the board's own runs", teams=["beta"])
    pick_template(live_api, "pick", open_class=True)
    pick_template(live_api, "fixed", open_class=False)

    d = make_browser()
    sign_in(d, tokens["member"])
    # The template names its class, with its description.
    d.get(d.base_url + "/ui/templates/pick")
    assert "batch (10): nightly work that may wait" in text_of(d, 'section[aria-labelledby="h-spec"]')

    # The form: a picker of the classes alpha may use, each with its description; not beta's class.
    d.get(d.base_url + "/ui/templates/pick/launch")
    picker = Select(d.find_element(By.ID, "priority_class"))
    options = [o.text for o in picker.options]
    assert options == ["urgent (100): deadline work", "batch (10): nightly work that may wait"], options
    assert picker.first_selected_option.get_attribute("value") == "batch"       # the template's
    assert "vip" not in text_of(d, "#priority-field")
    picker.select_by_value("urgent")
    d.find_element(By.ID, "preview").click()
    wait(d, lambda d: d.find_elements(By.ID, "preview-class"), "the preview")
    assert text_of(d, "#preview-class") == "urgent (100): deadline work"
    d.find_element(By.ID, "launch-previewed").click()
    wait(d, lambda d: d.find_elements(By.ID, "job-class"), "the job's page")
    assert text_of(d, "#job-class") == "urgent (priority 100)"
    job_id = d.find_element(By.ID, "job").get_attribute("data-job-id")

    # The queue names the class, not a bare number.
    d.get(d.base_url + "/ui/queue")
    row = d.find_element(By.XPATH, f'//a[@href="/ui/jobs/{job_id}"]/ancestor::tr')
    assert row.find_element(By.CSS_SELECTOR, "td.priority").text == "urgent (100)"

    # A class alpha may not use (through the advanced overrides): refused beside the field, with the
    # classes alpha may use; no API path, and not the other team's class's description.
    d.get(d.base_url + "/ui/templates/pick/launch")
    d.find_element(By.CSS_SELECTOR, "#advanced summary").click()
    d.find_element(By.ID, "overrides").send_keys('{"priority_class": "vip"}')
    d.find_element(By.ID, "preview").click()
    wait(d, lambda d: d.find_elements(By.ID, "priority_class-error"), "the refusal beside the field")
    said = text_of(d, "#priority_class-error")
    assert "'vip' is not a priority class team alpha may use" in said
    assert "urgent (100): deadline work" in said and "batch (10): nightly work that may wait" in said
    assert "/v1/" not in said and "board" not in said and "beta" not in said
    assert "priority class" in text_of(d, "#problem-list")

    # A template that does not let members change the class names it on the form, as text.
    d.get(d.base_url + "/ui/templates/fixed/launch")
    assert "batch (10): nightly work that may wait" in text_of(d, "#priority-field")
    assert not d.find_elements(By.CSS_SELECTOR, "select#priority_class")


# --- point 7: the small things, each in the browser ---------------------------------------------

@pytest.fixture
def queue_scene(live_api, server, tokens, db_url) -> dict:
    import httpx

    from tests.backends.localkit import Api
    from tests.conftest import bearer

    ids = {}
    with httpx.Client(base_url=server, headers=bearer(tokens["other"]), timeout=30) as c:
        beta = Api(c)
        for who in (live_api, beta):
            body = template_body("tiny")
            who.template("tiny", body["spec"], parameters=body["parameters"])
        ids["b1"] = beta.submit("tiny", display_name="bob-running")["id"]
        ids["b2"] = beta.submit("tiny", display_name="bob-waits")["id"]
    ids["a1"] = live_api.submit("tiny", display_name="alice-waits")["id"]
    ids["a2"] = live_api.submit("tiny", display_name="alice-next")["id"]
    ids["p1"] = live_api.submit("tiny", display_name="alice-preempted")["id"]
    ids["p2"] = live_api.submit("tiny", display_name="alice-preempted")["id"]
    set_capacity(db_url, "local", {"core": 4})
    set_share(db_url, "alpha", "local", {"core": 1})
    shape(db_url, ids["b1"], demand={"core": 4}, running=True)
    shape(db_url, ids["b2"], demand={"core": 1})
    shape(db_url, ids["a1"], demand={"core": 1}, priority=3)
    shape(db_url, ids["a2"], demand={"core": 1})
    preempt(db_url, ids["p1"], ids["p2"], second_state="RUNNING")
    shape(db_url, ids["p2"], demand={"core": 0}, running=True)
    return ids


def test_below_720_px_the_why_columns_show(make_browser, queue_scene, tokens):
    d = make_browser(width=700, height=900)
    sign_in(d, tokens["viewer"])
    assert d.execute_script("return window.innerWidth") <= 720
    d.get(d.base_url + "/ui/queue")
    why = d.find_element(By.XPATH, f'//a[@href="/ui/jobs/{queue_scene["a1"]}"]/ancestor::tr/td[last()]')
    assert why.is_displayed() and "free" in why.text
    d.get(d.base_url + f"/ui/jobs/{queue_scene['p1']}")
    cell = d.find_element(By.CSS_SELECTOR, "#panel-preemptions table.preemptions tbody td:last-child")
    assert cell.is_displayed() and "nominal quota" in cell.text
    header = d.find_elements(By.CSS_SELECTOR, "#panel-preemptions thead th")[-1]
    assert header.is_displayed() and header.text == "Why"


def test_amounts_have_their_units(make_browser, queue_scene, tokens):
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/queue")
    line = text_of(d, "section.queue > p")
    assert "Capacity 4 cores" in line and "in use 4 cores" in line and "free 0 cores" in line, line
    row = d.find_element(By.XPATH, f'//a[@href="/ui/jobs/{queue_scene["a1"]}"]/ancestor::tr')
    assert row.find_elements(By.TAG_NAME, "td")[4].text == "1 core"           # its demand
    beta = d.find_element(By.XPATH, '//table[contains(@class,"teams")]//td[text()="beta"]/ancestor::tr')
    assert "4 cores" in beta.text and "4 core " not in beta.text + " "


def test_the_preemptions_caption_links_the_served_help_page(make_browser, queue_scene, tokens):
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + f"/ui/jobs/{queue_scene['p1']}")
    assert "docs/queue.md" not in text_of(d, "#panel-preemptions caption")
    d.find_element(By.ID, "preemptions-help").click()
    wait(d, lambda d: d.current_url.endswith("/ui/help/queue#preemptions"), "the help page")
    assert d.find_element(By.ID, "preemptions").text == "Preemptions"
    assert "PREEMPTED" in d.find_element(By.TAG_NAME, "main").text


def test_queued_jobs_in_the_list_say_their_place_in_the_queue(make_browser, queue_scene, tokens):
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/queue")
    second = d.find_element(By.XPATH, f'//a[@href="/ui/jobs/{queue_scene["a2"]}"]/ancestor::tr/td[1]').text
    d.get(d.base_url + "/ui/jobs")
    assert text_of(d, f'tr[data-job-id="{queue_scene["a1"]}"] .queue-place') == "place 1 in the queue"
    assert text_of(d, f'tr[data-job-id="{queue_scene["a2"]}"] .queue-place') == f"place {second} in the queue"
    assert second != "1"
    assert not d.find_elements(By.CSS_SELECTOR, f'tr[data-job-id="{queue_scene["p2"]}"] .queue-place')


def test_a_backend_with_no_capacity_shows_the_running_jobs_limit(make_browser, live_api, tokens, db_url):
    body = template_body("tiny")
    live_api.template("tiny", body["spec"], parameters=body["parameters"])
    running = live_api.submit("tiny", display_name="runs")["id"]
    live_api.submit("tiny", display_name="waits")
    shape(db_url, running, demand={"core": 1}, running=True)
    d = make_browser()
    sign_in(d, tokens["viewer"])
    d.get(d.base_url + "/ui/queue")
    line = text_of(d, "section.queue > p")
    assert "No capacity set" in line and "8 jobs at once" in line and "(1 running)" in line, line
    alpha = d.find_element(By.XPATH, '//table[contains(@class,"teams")]//td[starts-with(text(),"alpha")]/ancestor::tr')
    use = alpha.find_elements(By.TAG_NAME, "td")[2].text
    assert use == "1 running job of the backend's 8 at once", use


def test_the_overrides_help_says_what_a_member_may_change(make_browser, live_api, tokens):
    body = template_body("tiny")
    live_api.template("tiny", body["spec"], parameters=body["parameters"])
    d = make_browser()
    sign_in(d, tokens["member"])
    d.get(d.base_url + "/ui/templates/tiny/launch")
    d.find_element(By.CSS_SELECTOR, "#advanced summary").click()
    said = text_of(d, "#overrides-help")
    assert "only workers.replica_count" in said and "Any field of the spec below" not in said, said
    assert "needs an admin" in said
    d.find_element(By.CSS_SELECTOR, "#overrides-help a").click()
    wait(d, lambda d: "/ui/templates/tiny" in d.current_url and d.find_elements(By.ID, "h-spec"), "the spec")
    admin = make_browser()
    sign_in(admin, tokens["admin"])
    admin.get(admin.base_url + "/ui/templates/tiny/launch")
    admin.find_element(By.CSS_SELECTOR, "#advanced summary").click()
    assert "any field of" in text_of(admin, "#overrides-help")
