"""The UI's fixtures: real local jobs (tests/ui/programs/trainer_like.py), the app
over a TestClient or a real uvicorn server, signed-in clients, and headless
Chromium from the OS packages driven by Selenium. Under CI=true a missing
chromium fails the browser tests instead of skipping them."""
from __future__ import annotations

import html
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from tests.backends.conftest import work_dir  # noqa: F401  (kills leftover replicas at teardown)
from tests.backends.localkit import Api, settings_for, thread_server
from tests.conftest import bearer, make_token
from tests.waiting import wait_for

PROGRAM = Path(__file__).parent / "programs" / "trainer_like.py"
ROOT = Path(__file__).resolve().parents[2]


def trainer_spec(*, epochs: int = 3, wait_file: str | None = None, workers: int = 1, exit_code: int = 0,
                 chief_extra: list[str] | None = None) -> dict:
    """A chief and workers running the trainer stand-in, with the template's `${epochs}`."""
    args = ["--epochs", "${epochs}"] + (["--wait-file", wait_file] if wait_file else [])
    spec = {"container": {"image_uri": "trainjobs-test:1", "command": [sys.executable, str(PROGRAM)], "args": args},
            "chief": {"machine_type": "n1-standard-4", "container": {"args": args + (chief_extra or [])
                                                                     + (["--exit", str(exit_code)] if exit_code else [])}},
            "base_output_directory": "gs://trainjobs-test/ui",
            # What a member may change beyond the parameters (the override policy, README).
            "overridable": ["workers.replica_count"]}
    if workers:
        spec["workers"] = {"replica_count": workers, "machine_type": "n1-standard-8",
                           "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}
    return spec


EPOCHS_PARAM = {"name": "epochs", "type": "int", "default": 3, "minimum": 1, "maximum": 50,
                "description": "Training epochs"}


def template_body(name: str, **spec_args) -> dict:
    return {"name": name, "description": f"{name}: the trainer stand-in", "spec": trainer_spec(**spec_args),
            "parameters": [EPOCHS_PARAM,
                           {"name": "optimizer", "type": "string", "default": "adam", "choices": ["adam", "sgd"],
                            "description": "Optimizer"},
                           {"name": "mixed_precision", "type": "bool", "default": False,
                            "description": "Use float16 where it is safe"},
                           {"name": "learning_rate", "type": "float", "default": 0.01, "minimum": 0.000001,
                            "maximum": 1, "description": "Learning rate"}]}


@pytest.fixture
def tokens(db_url) -> dict[str, str]:
    out = {role: make_token(db_url, "alpha", role, name=f"{role}-alice") for role in ("viewer", "member", "admin")}
    out["other"] = make_token(db_url, "beta", "admin", name="bob")
    return out


@pytest.fixture
def ui_settings(db_url, work_dir):  # noqa: F811
    # One local job at a time: a second one waits in QUEUED while the first runs. Event
    # streams end after a second, so every browser test also reconnects and resumes them.
    return settings_for(db_url, work_dir, local_max_running_jobs=1, ui_stream_interval_seconds=0.2,
                        logs_heartbeat_seconds=0.5, ui_stream_max_seconds=1.0)


@pytest.fixture
def app(ui_settings):
    return create_app(ui_settings)


@pytest.fixture
def client(app):
    with TestClient(app) as c:
        yield c


@pytest.fixture
def api(app, client, tokens) -> Api:
    """The JSON API as team alpha's admin, on the same app (`client` runs its lifespan)."""
    return Api(TestClient(app, headers=bearer(tokens["admin"])))


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    m = CSRF.search(html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def sign_in(client, token: str) -> None:
    page = client.get("/ui/login")
    assert page.status_code == 200
    r = client.post("/ui/login", data={"csrf": csrf_of(page.text), "token": token, "next": "/ui/jobs"},
                    follow_redirects=False)
    assert r.status_code == 303, r.text


def new_client(app, token: str | None = None) -> TestClient:
    c = TestClient(app)
    if token:
        sign_in(c, token)
    return c


def launch_form(c, name: str, **fields) -> dict:
    """The launch form's fields as its page fills them in, with `fields` over them."""
    page = c.get(f"/ui/templates/{name}/launch")
    assert page.status_code == 200, page.text
    return {**form_values(page.text), **fields}


def form_values(h: str) -> dict:
    """The values a launch page's form would post."""
    form = {"csrf": csrf_of(h), "version": re.search(r'name="version" value="(\d+)"', h).group(1),
            "idempotency_key": re.search(r'name="idempotency_key" value="([^"]*)"', h).group(1),
            "backend": "local", "labels": "", "overrides": "",
            "display_name": html.unescape(re.search(r'id="display_name" name="display_name" value="([^"]*)"', h).group(1))}
    for m in re.finditer(r'<input type="(number|text)" id="param-(\w+)" name="(param\.\w+)" value="([^"]*)"', h):
        form[m.group(3)] = html.unescape(m.group(4))
    for m in re.finditer(r'<select id="param-(\w+)" name="(param\.\w+)".*?<option selected>([^<]*)</option>', h, re.S):
        form[m.group(2)] = m.group(3)
    for m in re.finditer(r'name="(param\.\w+)" value="true" checked', h):
        form[m.group(1)] = "true"
    for m in re.finditer(r'<input type="number" id="set-[\w-]+" name="(set\.[\w.]+)" value="([^"]*)"', h):
        form[m.group(1)] = html.unescape(m.group(2))
    for m in re.finditer(r'<select id="set-[\w-]+" name="(set\.[\w.]+)".*?<option value="([^"]*)" selected>', h, re.S):
        form[m.group(1)] = html.unescape(m.group(2))
    return form


# --- the browser --------------------------------------------------------------------

def _chromium() -> tuple[str | None, str | None]:
    return (shutil.which("chromium") or shutil.which("chromium-browser"),
            shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None))


@pytest.fixture(scope="session")
def chromium_paths() -> tuple[str, str]:
    browser, driver = _chromium()
    if not browser or not driver:
        problem = ("chromium and chromedriver are needed for the UI's browser tests "
                   "(apt-get install -y chromium chromium-driver; scripts/test.sh does it)")
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return browser, driver


@pytest.fixture
def server(app):
    with thread_server(app) as url:
        yield url


@pytest.fixture
def live_api(server, tokens):
    """The JSON API of the server the browser talks to, as team alpha's admin (the same
    process: a second app lifespan would run a second local backend on the same folder)."""
    import httpx

    with httpx.Client(base_url=server, headers=bearer(tokens["admin"]), timeout=30) as c:
        yield Api(c)


@pytest.fixture
def make_browser(chromium_paths, server):
    """make_browser(width=1280, height=900, dark=False) -> a headless Chromium; all quit at teardown
    (before the server stops, so no open event stream holds it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    drivers = []

    def make(width: int = 1280, height: int = 900, dark: bool = False, javascript: bool = True):
        opts = Options()
        opts.binary_location = chromium_paths[0]
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    f"--window-size={width},{height}", "--lang=en-US", "--no-first-run",
                    "--disable-background-timer-throttling", "--disable-renderer-backgrounding"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, CSP refusals
        if not javascript:
            opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
        driver = webdriver.Chrome(options=opts, service=Service(executable_path=chromium_paths[1]))
        drivers.append(driver)
        if dark:
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                   {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})

        def resize(w: int, h: int) -> None:
            if w < 600:  # a phone: its own viewport and touch, not a narrow desktop window
                driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                       {"width": w, "height": h, "deviceScaleFactor": 2, "mobile": True})
            else:
                driver.set_window_size(w, h)
        resize(width, height)
        driver.resize = resize
        driver.base_url = server
        return driver

    yield make
    for d in drivers:
        d.quit()


def screenshot_dir(tmp_path) -> Path:
    """docs/screenshots when TRAINJOBS_UI_SCREENSHOTS=1 (taken once, committed), else a temp folder."""
    if os.environ.get("TRAINJOBS_UI_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        return out
    return tmp_path


__all__ = ["Api", "wait_for", "trainer_spec", "template_body", "sign_in", "csrf_of", "new_client"]
