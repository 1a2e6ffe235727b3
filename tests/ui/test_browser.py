"""The UI in a real headless Chromium (the OS's, through its chromedriver), against
the real service on a real uvicorn server running real local jobs. Every wait is
on something the page shows (Selenium explicit waits), never on time."""
from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.backends.localkit import TIMEOUT
from tests.ui.conftest import EPOCHS_PARAM, screenshot_dir, template_body, trainer_spec

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def wait(driver, condition, what: str, timeout: float = TIMEOUT):
    # Live panels are swapped in whole: an element found a moment ago may be replaced.
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
                         ).until(condition, f"timed out waiting for {what}")


def sign_in(driver, token: str) -> None:
    """With the keyboard only: the token field has the focus, Enter submits."""
    driver.get(driver.base_url + "/ui/login")
    active = driver.switch_to.active_element
    assert active.get_attribute("id") == "token"
    active.send_keys(token, Keys.ENTER)
    wait(driver, EC.presence_of_element_located((By.ID, "sign-out")), "the signed-in page")


def row_state(driver, job_id: str):
    return lambda d: d.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{job_id}"] .state').get_attribute("data-state")


def page_state(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#job-state .state").get_attribute("data-state")


def mark_page(driver) -> None:
    driver.execute_script("window.__sameDocument = true")


def record_statuses(driver) -> None:
    """Keep every text the page's stream status line shows (the log's or the list's)."""
    driver.execute_script("""
        window.__said = [];
        const el = document.getElementById('log-status') || document.getElementById('live-status');
        new MutationObserver(() => window.__said.push(el.textContent))
            .observe(el, {childList: true, characterData: true, subtree: true});""")


def said(driver) -> list[str]:
    return driver.execute_script("return window.__said")


def same_document(driver) -> bool:
    return driver.execute_script("return window.__sameDocument === true")


def points(driver, metric: str, series: str) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, f'svg[data-metric="{metric}"] circle[data-series="{series}"]'))


def test_a_job_goes_from_queued_to_succeeded_live_with_charts_and_logs(make_browser, live_api, tokens, tmp_path):
    api = live_api
    gate = tmp_path / "go"
    api.template("blocker", trainer_spec(epochs=1, wait_file=str(gate), workers=0), parameters=[EPOCHS_PARAM])
    body = template_body("demo-like")
    api.template("demo-like", body["spec"], parameters=body["parameters"], description=body["description"])
    blocker = api.submit("blocker")
    api.wait_state(blocker["id"], "RUNNING")
    job = api.submit("demo-like", parameters={"epochs": 3}, display_name="demo-like-run", labels={"team": "vision"})
    assert api.job(job["id"])["state"] == "QUEUED"  # one local job at a time: it waits for the blocker

    listing = make_browser()
    sign_in(listing, tokens["member"])
    listing.get(listing.base_url + "/ui/jobs")
    assert row_state(listing, job["id"])(listing) == "QUEUED"
    wait(listing, lambda d: d.find_element(By.ID, "jobs").get_attribute("data-live") == "open", "the live feed")
    mark_page(listing)
    record_statuses(listing)

    page = make_browser()
    sign_in(page, tokens["viewer"])
    page.get(f"{page.base_url}/ui/jobs/{job['id']}")
    assert page_state(page) == "QUEUED"
    assert page.find_elements(By.ID, "no-epochs")
    wait(page, lambda d: d.find_element(By.ID, "logs").get_attribute("data-follow") == "open", "the log stream")
    mark_page(page)
    record_statuses(page)

    gate.touch()  # the blocker finishes; the demo-like job starts, trains 3 epochs, succeeds

    wait(listing, lambda d: row_state(d, job["id"])(d) == "SUCCEEDED", "the listed job to succeed")
    assert same_document(listing), "the list was reloaded"
    cell = listing.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{job["id"]}"] .progress-cell')
    wait(listing, lambda d: "epoch 3/3" in cell.text, "the progress cell to read epoch 3/3")

    wait(page, lambda d: page_state(d) == "SUCCEEDED", "the job page to show SUCCEEDED")
    wait(page, lambda d: points(d, "loss", "loss") == 3, "one loss point per epoch")
    assert points(page, "loss", "val_loss") == 3
    assert points(page, "accuracy", "accuracy") == 3 and points(page, "accuracy", "val_accuracy") == 3
    titles = [t.get_attribute("textContent") for t in
              page.find_elements(By.CSS_SELECTOR, 'svg[data-metric="loss"] circle[data-series="loss"] title')]
    assert titles == ["epoch 1: loss 1", "epoch 2: loss 0.5", "epoch 3: loss 0.3333"]
    statuses = [td.text for td in page.find_elements(By.CSS_SELECTOR, "table.replicas .replica-status")]
    assert statuses == ["finished", "finished"]

    # The logs were followed live (the page was opened before any replica started).
    wait(page, lambda d: d.find_element(By.ID, "logs").get_attribute("data-follow") == "ended", "the log stream's end")
    text = page.find_element(By.ID, "log-lines").text
    assert "workerpool0-0: training finished" in text and "workerpool1-0: training finished" in text
    assert "SUCCEEDED" in page.find_element(By.ID, "log-status").text
    assert same_document(page), "the job page was reloaded"
    # Streams here end every second (ui_stream_max_seconds=1) and are back within their retry:
    # a normal end is not an outage, and the pages never said "Reconnecting" (issue 37).
    assert [t for t in said(page) + said(listing) if "Reconnecting" in t] == []

    # Find within the page, then one replica's logs only.
    finder = page.find_element(By.ID, "log-filter")
    finder.send_keys("epoch 2 done")
    shown = [ln.text for ln in page.find_elements(By.CSS_SELECTOR, "#log-lines .ln") if ln.is_displayed()]
    assert len(shown) == 2 and all("epoch 2 done" in s for s in shown)
    finder.clear()
    finder.send_keys(Keys.BACKSPACE)
    Select(page.find_element(By.ID, "log-replica")).select_by_value("workerpool1-0")
    wait(page, lambda d: d.find_element(By.ID, "logs").get_attribute("data-follow") == "ended", "the replica's log")
    replicas = {ln.get_attribute("data-replica") for ln in page.find_elements(By.CSS_SELECTOR, "#log-lines .ln")}
    assert replicas == {"workerpool1-0"}
    assert page.find_element(By.ID, "log-download").get_attribute("href").endswith("logs.txt?replica=workerpool1-0")
    assert console_errors(page) == [] and console_errors(listing) == []


def test_launch_from_the_form_with_a_preview_then_cancel(make_browser, live_api, tokens, tmp_path):
    api = live_api
    body = template_body("sleeper", wait_file=str(tmp_path / "never"))
    api.template("sleeper", body["spec"], parameters=body["parameters"], description=body["description"])
    d = make_browser()
    sign_in(d, tokens["member"])
    d.find_element(By.LINK_TEXT, "Templates").click()
    d.find_element(By.CSS_SELECTOR, 'a[href="/ui/templates/sleeper/launch"]').click()

    epochs = d.find_element(By.ID, "param-epochs")
    assert (epochs.get_attribute("type"), epochs.get_attribute("min"), epochs.get_attribute("max"),
            epochs.get_attribute("value")) == ("number", "1", "50", "3")
    assert [o.text for o in Select(d.find_element(By.ID, "param-optimizer")).options] == ["adam", "sgd"]
    assert d.find_element(By.ID, "param-mixed_precision").get_attribute("type") == "checkbox"
    assert d.find_element(By.ID, "param-learning_rate").get_attribute("step") == "any"

    # Multi-line text boxes as typed (the browser posts CRLF): they survive every refusal and
    # preview below exactly (issue 37: each one added a visible \x0d until Launch failed).
    labels, overrides = "owner=newcomer\nteam=vision", '{\n  "workers": {"replica_count": 2}\n}'
    d.find_element(By.ID, "labels").send_keys(labels)
    d.find_element(By.CSS_SELECTOR, "#advanced summary").click()
    d.find_element(By.ID, "overrides").send_keys(overrides)

    def text_boxes(d) -> tuple[str, str]:
        return (d.find_element(By.ID, "labels").get_attribute("value"),
                d.find_element(By.ID, "overrides").get_attribute("value"))

    # Out of bounds: refused beside the field, nothing launched.
    epochs.clear()
    epochs.send_keys("500")
    d.find_element(By.ID, "launch").click()
    error = wait(d, EC.presence_of_element_located((By.ID, "param-epochs-error")), "the field's error")
    assert "above the maximum 50" in error.text
    assert api.c.get("/v1/jobs").json()["items"] == []
    assert text_boxes(d) == (labels, overrides)

    epochs = d.find_element(By.ID, "param-epochs")
    epochs.clear()
    epochs.send_keys("7")
    Select(d.find_element(By.ID, "param-optimizer")).select_by_visible_text("sgd")
    d.find_element(By.ID, "param-mixed_precision").click()
    count = d.find_element(By.ID, "set-workers-replica_count")  # the template's overridable setting, as a field
    assert count.get_attribute("value") == "1"
    count.clear()
    d.find_element(By.ID, "preview").click()
    wait(d, EC.presence_of_element_located((By.ID, "set-workers-replica_count-error")), "the blank count refused")
    count = d.find_element(By.ID, "set-workers-replica_count")
    count.clear()
    count.send_keys("2")
    d.find_element(By.ID, "preview").click()
    wait(d, EC.presence_of_element_located((By.ID, "preview-result")), "the dry-run preview")
    pools = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")[:5]]
             for tr in d.find_elements(By.CSS_SELECTOR, "#preview-result table.pools tbody tr")]
    assert pools == [["workerpool0", "chief", "1", "n1-standard-4", "none"],
                     ["workerpool1", "worker", "2", "n1-standard-8", "1 × NVIDIA_TESLA_T4"]]
    assert "an hour" in d.find_element(By.ID, "preview-cost").text
    configs = {}
    for details in d.find_elements(By.CSS_SELECTOR, "#preview-result details.replica-config"):
        configs[details.get_attribute("data-task")] = json.loads(
            details.find_element(By.TAG_NAME, "pre").get_attribute("textContent"))
    assert configs["workerpool0-0"]["task"] == {"type": "chief", "index": 0}
    assert configs["workerpool1-1"]["task"] == {"type": "worker", "index": 1}
    # A local job: the preview shows what the local backend gives (ports are chosen at launch).
    port = "127.0.0.1:<port chosen at launch>"
    assert configs["workerpool0-0"]["cluster"] == {"chief": [port], "worker": [port, port]}
    assert d.find_element(By.ID, "param-epochs").get_attribute("value") == "7"  # the form keeps its values
    assert text_boxes(d) == (labels, overrides)
    assert api.c.get("/v1/jobs").json()["items"] == []                           # a preview stores nothing

    named = d.find_element(By.ID, "preview-name").text
    d.find_element(By.ID, "launch-previewed").click()  # beside the preview: launches what it showed
    wait(d, EC.url_contains("/ui/jobs/"), "the new job's page")
    job_id = d.current_url.split("/ui/jobs/")[1].split("?")[0]
    assert api.job(job_id)["display_name"] == named
    assert api.job(job_id)["overrides"] == {"workers": {"replica_count": 2}}
    assert api.job(job_id)["labels"] == {"owner": "newcomer", "team": "vision"}
    assert api.job(job_id)["parameters"] == {"epochs": 7, "optimizer": "sgd", "mixed_precision": True,
                                             "learning_rate": 0.01}
    wait(d, lambda d: page_state(d) == "RUNNING", "the job to run")

    wait(d, lambda d: d.find_element(By.ID, "cancel").click() or True, "the cancel button")
    wait(d, EC.alert_is_present(), "the confirmation").accept()
    wait(d, lambda d: page_state(d) == "CANCELLED", "the job to be cancelled")
    assert not d.find_elements(By.ID, "cancel")
    assert api.job(job_id)["state"] == "CANCELLED"
    events = [e["actor"] for e in api.events(job_id) if e["to_state"] == "CANCELLING"]
    assert events == ["member-alice@alpha"]


def test_a_viewer_sees_no_buttons_and_the_server_refuses_them(make_browser, live_api, tokens, tmp_path):
    api = live_api
    body = template_body("sleeper", wait_file=str(tmp_path / "never"), workers=0)
    api.template("sleeper", body["spec"], parameters=body["parameters"])
    job = api.submit("sleeper")
    api.wait_state(job["id"], "RUNNING")

    d = make_browser()
    sign_in(d, tokens["viewer"])
    assert d.find_element(By.CSS_SELECTOR, ".who .role").text == "viewer"
    assert not d.find_elements(By.ID, "launch-link")
    d.get(f"{d.base_url}/ui/jobs/{job['id']}")
    assert page_state(d) == "RUNNING"
    assert not d.find_elements(By.ID, "cancel") and not d.find_elements(By.ID, "launch-again")
    d.get(f"{d.base_url}/ui/templates")
    assert not d.find_elements(By.CSS_SELECTOR, 'a[href$="/launch"]')

    d.get(f"{d.base_url}/ui/templates/sleeper/launch")
    assert "viewer token" in d.find_element(By.ID, "problem-detail").text

    # A hand-made cancel form, with this session's own CSRF token: refused all the same.
    d.get(f"{d.base_url}/ui/jobs/{job['id']}")
    d.execute_script("""
        const f = document.createElement('form'); f.method = 'post'; f.action = arguments[0];
        const i = document.createElement('input'); i.type = 'hidden'; i.name = 'csrf';
        i.value = document.querySelector('meta[name=csrf-token]').content; f.append(i);
        document.body.append(f); f.submit();""", f"/ui/jobs/{job['id']}/cancel")
    detail = wait(d, EC.presence_of_element_located((By.ID, "problem-detail")), "the refusal")
    assert "viewer" in detail.text and "member" in detail.text
    assert d.find_element(By.TAG_NAME, "h1").text == "Forbidden"
    assert api.job(job["id"])["state"] == "RUNNING"


def console_errors(d) -> list[str]:
    """What the page's console said at SEVERE level (script errors, refused by the CSP)."""
    return [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]


def _no_sideways_scroll(d) -> bool:
    return d.execute_script("return document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def _background_luminance(d) -> float:
    rgb = d.execute_script("return getComputedStyle(document.body).backgroundColor")
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_phone_dark_and_laptop_light_layouts_without_javascript_too(make_browser, live_api, tokens, tmp_path):
    api = live_api
    body = template_body("demo-like")
    api.template("demo-like", body["spec"], parameters=body["parameters"], description=body["description"])
    new = {**body, "spec": trainer_spec(workers=2)}
    assert api.c.put("/v1/templates/demo-like", json={k: new[k] for k in ("spec", "parameters", "description")}
                     ).status_code == 200
    # Its chief prints INFO, a warning and a caught traceback on stderr: the shot shows their colours.
    done = api.submit("demo-like", parameters={"epochs": 6}, labels={"team": "vision"}, display_name="resnet-sweep-a",
                      overrides={"chief": {"container": {"args": ["--epochs", "6", "--stderr-demo"]}}})
    api.wait_state(done["id"], "SUCCEEDED")
    failed = api.submit("demo-like", display_name="resnet-sweep-b",
                        overrides={"chief": {"container": {"args": ["--epochs", "2", "--exit", "3"]}}})
    api.wait_state(failed["id"], "FAILED")
    shots = screenshot_dir(tmp_path)

    laptop = make_browser(1366, 1000)
    sign_in(laptop, tokens["member"])
    laptop.get(laptop.base_url + "/ui/jobs")
    assert _background_luminance(laptop) > 0.8
    laptop.save_screenshot(str(shots / "jobs-laptop-light.png"))
    laptop.resize(1366, 2200)
    laptop.get(f"{laptop.base_url}/ui/jobs/{done['id']}")
    assert points(laptop, "loss", "loss") == 6
    assert laptop.find_elements(By.CSS_SELECTOR, "#log-lines .sev-traceback")
    laptop.save_screenshot(str(shots / "job-laptop-light.png"))
    laptop.get(f"{laptop.base_url}/ui/jobs/{failed['id']}")
    assert "workerpool0-0" in laptop.find_element(By.ID, "job-error").text
    laptop.resize(1366, 1700)
    laptop.get(f"{laptop.base_url}/ui/templates/demo-like/launch")
    laptop.find_element(By.ID, "preview").click()
    wait(laptop, EC.presence_of_element_located((By.ID, "preview-result")), "the preview")
    laptop.save_screenshot(str(shots / "launch-preview-laptop-light.png"))
    laptop.get(f"{laptop.base_url}/ui/templates/demo-like/diff?a=1&b=2")
    assert laptop.find_elements(By.CSS_SELECTOR, ".diff ins") and laptop.find_elements(By.CSS_SELECTOR, ".diff del")
    laptop.get(f"{laptop.base_url}/ui/templates/demo-like")
    assert console_errors(laptop) == []

    phone = make_browser(390, 844, dark=True)
    sign_in(phone, tokens["member"])
    phone.get(phone.base_url + "/ui/jobs")
    assert _background_luminance(phone) < 0.2
    assert _no_sideways_scroll(phone)
    phone.save_screenshot(str(shots / "jobs-phone-dark.png"))
    phone.resize(390, 2400)
    phone.get(f"{phone.base_url}/ui/jobs/{done['id']}")
    assert _no_sideways_scroll(phone)
    assert points(phone, "loss", "loss") == 6
    phone.save_screenshot(str(shots / "job-phone-dark.png"))
    assert console_errors(phone) == []

    # Keyboard: from the top of the list, Tab reaches the newest job's link.
    phone.get(phone.base_url + "/ui/jobs")
    body_el = phone.find_element(By.TAG_NAME, "body")
    body_el.send_keys(Keys.TAB)
    assert phone.switch_to.active_element.get_attribute("class") == "skip"
    for _ in range(40):
        href = phone.switch_to.active_element.get_attribute("href") or ""
        if href.endswith(f"/ui/jobs/{failed['id']}"):
            break
        phone.switch_to.active_element.send_keys(Keys.TAB)
    else:
        pytest.fail("Tab never reached the job's link")

    # Without JavaScript the page still shows its data: state, charts, logs.
    plain = make_browser(1280, 900, javascript=False)
    sign_in(plain, tokens["viewer"])
    plain.get(f"{plain.base_url}/ui/jobs/{done['id']}")
    assert page_state(plain) == "SUCCEEDED"
    assert points(plain, "loss", "val_loss") == 6
    assert "workerpool0-0: training finished" in plain.find_element(By.ID, "log-lines").text
    assert not plain.find_element(By.ID, "log-filter").is_displayed()


def test_live_log_colours_local_times_a_quiet_cancel_and_the_reconnecting_sign(make_browser, live_api, server,
                                                                                 tokens, tmp_path):
    """Issue 25: what the scripts do. The browser goes through a proxy, cut to play an outage."""
    from tests.faults.tcp_proxy import TcpProxy
    from tests.ui.log_severity_cases import CASES

    api = live_api
    gate = tmp_path / "go"
    body = template_body("noisy", epochs=1, wait_file=str(gate), workers=0, chief_extra=["--stderr-demo"])
    api.template("noisy", body["spec"], parameters=body["parameters"])
    noisy = api.submit("noisy", parameters={"epochs": 1})
    host, port = server.removeprefix("http://").split(":")
    proxy = TcpProxy(host, int(port))
    try:
        d = make_browser()
        d.base_url = f"http://127.0.0.1:{proxy.port}"
        d.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})  # UTC+05:30
        sign_in(d, tokens["member"])
        # The browser's classifier says what the server's does of every line of the table.
        assert d.execute_script("const c = TJ.classifier(); return arguments[0].map(c);",
                                [m for m, _ in CASES]) == [s for _, s in CASES]

        d.get(f"{d.base_url}/ui/jobs/{noisy['id']}")
        wait(d, lambda d: page_state(d) == "RUNNING", "the job to run")
        wait(d, lambda d: d.find_element(By.ID, "logs").get_attribute("data-follow") == "open", "the log stream")

        # Local times: the UTC stays in the title, the text is Kolkata's (minutes move by 30).
        started = d.find_element(By.CSS_SELECTOR, "#panel-header dt + dd time[data-local]")
        at = datetime.fromisoformat(started.get_attribute("datetime").replace("Z", "+00:00"))
        assert started.get_attribute("title") == at.strftime("%Y-%m-%d %H:%M:%S UTC")
        local = at.astimezone(ZoneInfo("Asia/Kolkata"))
        assert local.strftime(":%M:%S") in started.text and "GMT+5:30" in started.text, started.text

        # The service is cut off: the page says so at once and its clocks stop; back, it says nothing.
        assert not d.find_element(By.ID, "offline").is_displayed()
        proxy.cut()
        wait(d, lambda d: d.find_element(By.ID, "offline").is_displayed(), "the reconnecting sign")
        assert d.execute_script("return document.documentElement.dataset.offline") == "true"
        frozen = d.find_element(By.CSS_SELECTOR, "#panel-header .duration").text
        d.execute_script("TJ.tick()")
        assert d.find_element(By.CSS_SELECTOR, "#panel-header .duration").text == frozen
        proxy.restore()
        wait(d, lambda d: not d.find_element(By.ID, "offline").is_displayed(), "the sign to go")

        # Lines that arrive live are coloured by what they say, not by their stream.
        gate.touch()
        wait(d, lambda d: "ValueError: a caught error on stderr" in d.find_element(By.ID, "log-lines").text,
             "the traceback's last line")
        lines = {ln.find_element(By.CLASS_NAME, "msg").text: ln for ln in d.find_elements(By.CSS_SELECTOR, "#log-lines .ln")}
        info = next(ln for m, ln in lines.items() if m.endswith("healthy info on stderr"))
        plain = next(ln for m, ln in lines.items() if m.startswith("hello from"))
        assert (info.get_attribute("data-stream"), info.get_attribute("data-severity")) == ("stderr", "")
        colour = lambda ln: ln.find_element(By.CLASS_NAME, "msg").value_of_css_property("color")  # noqa: E731
        assert colour(info) == colour(plain)
        assert [lines[m].get_attribute("data-severity") for m in
                ("WARNING:tensorflow:a warning on stderr", "Traceback (most recent call last):",
                 "ValueError: a caught error on stderr")] == ["warning", "traceback", "error"]
        assert colour(lines["ValueError: a caught error on stderr"]) != colour(plain)
        ts = info.find_element(By.CLASS_NAME, "ts")
        assert ts.get_attribute("title").endswith("Z") and ts.text != ts.get_attribute("title")
        api.wait_state(noisy["id"], "SUCCEEDED")

        # A cancel of one's own: a notice said once, no error, no Cancel button while it stops.
        sleeper = template_body("sleeper", wait_file=str(tmp_path / "never"), workers=0)
        api.template("sleeper", sleeper["spec"], parameters=sleeper["parameters"])
        job = api.submit("sleeper")
        d.get(f"{d.base_url}/ui/jobs/{job['id']}")
        wait(d, lambda d: page_state(d) == "RUNNING", "the sleeper to run")
        # Found and clicked in one try: the header may be swapped in again between the two (a
        # fresh-clone run failed on a stale button after RUNNING showed).
        wait(d, lambda d: d.find_element(By.ID, "cancel").click() or True, "the cancel button")
        wait(d, EC.alert_is_present(), "the confirmation").accept()
        wait(d, EC.presence_of_element_located((By.ID, "job-cancelled")), "the cancel notice")
        assert "notice=" not in d.current_url  # said once: a reload or going back does not repeat it
        assert d.find_element(By.ID, "notice").is_displayed()
        assert not d.find_elements(By.ID, "cancel") and not d.find_elements(By.ID, "job-error")
        wait(d, lambda d: page_state(d) == "CANCELLED", "the job to be cancelled")
        assert "Cancelled by member-alice@alpha" in d.find_element(By.ID, "job-cancelled").text
        d.refresh()
        assert not d.find_elements(By.ID, "notice")
    finally:
        proxy.close()
