"""Issue 37: the papercuts a newcomer's day with the pages found, each as the page now shows it."""
from __future__ import annotations

import html
import re

from tests.conftest import ONE_DATABASE
from tests.ui.conftest import csrf_of, launch_form, new_client, template_body

pytestmark = ONE_DATABASE


def _text(h: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", h)))


def test_search_takes_the_8_character_id_the_cli_prints(app, api, tokens):
    body = template_body("sleeper", wait_file="/nonexistent/never", workers=0)
    api.template("sleeper", body["spec"], parameters=body["parameters"])
    jobs = [api.submit("sleeper", display_name=f"s{i}")["id"] for i in range(2)]
    c = new_client(app, tokens["viewer"])
    for job in jobs:
        for q in (job[:8], job[:8].upper(), job[:13]):  # as `jobs list` prints it; dashes are fine
            assert re.findall(r'<tr data-job-id="([^"]+)"', c.get(f"/ui/jobs?q={q}").text) == [job], q
    assert 'placeholder="name, template or id"' in c.get("/ui/jobs").text
    for job in jobs:
        api.c.post(f"/v1/jobs/{job}/cancel")


def test_a_cancel_is_said_once_without_notice_in_the_address_and_asks_first_without_javascript(app, api, tokens,
                                                                                                  tmp_path):
    body = template_body("sleeper", wait_file=str(tmp_path / "never"), workers=0)
    api.template("sleeper", body["spec"], parameters=body["parameters"])
    job = api.submit("sleeper", display_name="to-cancel")
    api.wait_state(job["id"], "RUNNING")
    c = new_client(app, tokens["member"])
    page = c.get(f"/ui/jobs/{job['id']}").text
    assert f'<a class="button danger nojs-only" id="cancel-ask" href="/ui/jobs/{job["id"]}/cancel">' in page
    ask = c.get(f"/ui/jobs/{job['id']}/cancel")  # a GET asks and changes nothing
    assert ask.status_code == 200 and "Cancel to-cancel?" in ask.text and 'id="cancel-confirmed"' in ask.text
    assert api.job(job["id"])["state"] == "RUNNING"
    r = c.post(f"/ui/jobs/{job['id']}/cancel", data={"csrf": csrf_of(ask.text)}, follow_redirects=False)
    assert r.headers["location"] == f"/ui/jobs/{job['id']}"
    shown = c.get(r.headers["location"]).text
    assert '<p class="notice" role="status" id="notice">Cancel requested.</p>' in shown
    assert 'id="notice"' not in c.get(r.headers["location"]).text  # said once
    api.wait_state(job["id"], "CANCELLED")
    final = c.get(f"/ui/jobs/{job['id']}").text
    progress = _text(final.split('id="panel-progress"', 1)[1].split("</section>", 1)[0])
    assert "stopped" in progress and "examples/s" not in progress and "training" not in progress, progress
    assert "being stopped" not in final and "Cancel requested" not in final


def test_a_local_jobs_output_folder_is_a_path_with_its_host_beside(app, api, tokens):
    body = template_body("quick", workers=0)
    api.template("quick", body["spec"], parameters=body["parameters"])
    job = api.wait_state(api.submit("quick", parameters={"epochs": 1})["id"], "SUCCEEDED")
    page = new_client(app, tokens["viewer"]).get(f"/ui/jobs/{job['id']}").text
    folder = html.unescape(re.search(r'<code id="output-dir">([^<]+)</code>', page).group(1))
    assert folder.startswith("/") and folder.endswith("/output/"), folder
    host = _text(page.split('id="output-dir"', 1)[1].split("</dd>", 1)[0])
    assert "(on the service's host)" in host, host
    # Log lines without JavaScript: the time of day in UTC, as the script shows it (HH:MM:SS.mmm).
    assert re.search(r'data-local="time">\d\d:\d\d:\d\d\.\d{3}</time>', page)
    # Succeeded: its progress says where it ended, not a phase and a rate.
    assert "epoch 1/1 · finished" in _text(page.split('id="panel-progress"', 1)[1].split("</section>", 1)[0])


def test_template_values_as_declared_and_launch_again_points_at_a_newer_version(app, api, tokens):
    body = template_body("typed", workers=0)
    body["spec"]["scheduling"] = {"restart_job_on_worker_restart": False}
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    h = c.get("/ui/templates/typed").text
    params = _text(h.split('id="h-params"', 1)[1].split("</section>", 1)[0])
    assert "epochsint 3 1 … 50 " in params and "50.0" not in params, params  # an int's bounds as ints
    spec = _text(h.split('id="h-spec"', 1)[1].split("<details>", 1)[0])
    assert "restart_job_on_worker_restart: false" in spec and "False" not in spec, spec
    job = api.submit("typed", parameters={"epochs": 1})
    assert "newer-version" not in c.get(f"/ui/jobs/{job['id']}").text
    assert api.c.put("/v1/templates/typed", json={"spec": body["spec"], "parameters": body["parameters"],
                                                  "description": "v2"}).status_code == 200
    hint = re.search(r'<span class="muted" id="newer-version">(.*?)</span>', c.get(f"/ui/jobs/{job['id']}").text)
    assert hint and "v2" in hint.group(1), hint
    href = html.unescape(re.search(r'href="([^"]+)"', hint.group(1)).group(1))
    again = c.get(href).text
    assert "Launch typed <span class=\"muted\">v2</span>" in again and f"values of job <a href=\"/ui/jobs/{job['id']}" in again
    assert "Launch typed <span class=\"muted\">v1</span>" in c.get(f"/ui/templates/typed/launch?from={job['id']}").text
    api.c.post(f"/v1/jobs/{job['id']}/cancel")


def test_the_error_box_counts_and_lists_every_problem_in_one_wording(app, api, tokens):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    r = c.post("/ui/templates/typed/launch", data=launch_form(
        c, "typed", action="preview", labels="no equals sign",
        **{"param.epochs": "500", "set.workers.replica_count": "0"}))
    assert r.status_code == 422
    box = r.text.split('id="form-errors"', 1)[1].split("</div>", 1)[0]
    assert "Nothing was launched: 3 problems" in _text(box)
    items = [_text(li) for li in re.findall(r"<li>(.*?)</li>", box, re.S)]
    assert items == ["epochs: 500 is above the maximum 50 — use a value between 1 and 50",
                     "labels: line 1: write key=value, one label a line",
                     "workers: replica count: 0 is below the minimum 1 — use a value between 1 and 1000"], items
    assert '<a href="#param-epochs">' in box  # each links to its field


def test_the_cost_line_reads_as_a_price_and_the_timeout_is_a_field(app, api, tokens):
    body = template_body("typed", workers=0)
    body["spec"]["overridable"] = ["scheduling.timeout_seconds"]
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    form = launch_form(c, "typed", action="preview")
    assert form.get("set.scheduling.timeout_seconds") == ""
    r = c.post("/ui/templates/typed/launch", data={**form, "set.scheduling.timeout_seconds": "7200"})
    assert r.status_code == 200, r.text
    cost = _text(re.search(r'<p id="preview-cost">(.*?)</p>', r.text, re.S).group(1))
    dry = api.c.post("/v1/jobs?dry_run=true", json={"template": "typed", "backend": "local",
                                                    "overrides": {"scheduling": {"timeout_seconds": 7200}}}).json()
    assert dry["cost"]["timeout_seconds"] == 7200
    assert re.search(r"USD \d+\.\d\d an hour; at most USD \d+\.\d\d if it runs until it is stopped after "
                     r"2 hours \(its timeout\)\.", cost), cost
    assert "scheduling.timeout" not in cost and "missing" not in cost and "pd-ssd" not in cost
    launched = c.post("/ui/templates/typed/launch", data={**form, "set.scheduling.timeout_seconds": "7200",
                                                          "action": "launch"}, follow_redirects=False)
    job = api.job(launched.headers["location"].rsplit("/", 1)[1])
    assert job["overrides"] == {"scheduling": {"timeout_seconds": 7200}}
    api.c.post(f"/v1/jobs/{job['id']}/cancel")


def test_the_landing_page_follows_dark_mode(app, client):
    landing = client.get("/").text
    assert '<meta name="color-scheme" content="light dark">' in landing and "prefers-color-scheme: dark" in landing
