"""What a newcomer's first hour found on the pages (issue 25): log lines coloured by
severity, a diff line by line, chart titles that are titles, a cancel that is no
error, times a browser can localize, search and "my jobs", where the output is."""
from __future__ import annotations

import html
import re
from datetime import datetime
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient

from tests.backends.localkit import Api
from tests.conftest import ONE_DATABASE, bearer
from tests.ui.conftest import csrf_of, form_values, launch_form, new_client, template_body, trainer_spec

pytestmark = ONE_DATABASE


@pytest.fixture
def noisy(api) -> dict:
    """A succeeded job whose chief printed INFO, a warning and a traceback on stderr."""
    body = template_body("noisy", workers=0, chief_extra=["--stderr-demo"])
    api.template("noisy", body["spec"], parameters=body["parameters"])
    job = api.submit("noisy", parameters={"epochs": 2})
    return api.wait_state(job["id"], "SUCCEEDED")


def _lines(page: str) -> list[tuple[str, str, str]]:
    """(stream, severity, message) of each log line the page rendered."""
    found = re.findall(r'<span class="ln[^"]*" data-replica="[^"]*" data-stream="(\w+)" data-severity="(\w*)">'
                       r'.*?<span class="msg">(.*?)</span>', page)
    return [(s, sev, html.unescape(m)) for s, sev, m in found]


def test_log_lines_are_coloured_by_severity_not_by_stream(app, noisy, tokens):
    page = new_client(app, tokens["viewer"]).get(f"/ui/jobs/{noisy['id']}").text
    by_message = {m: (stream, sev) for stream, sev, m in _lines(page)}
    info = next(m for m in by_message if m.endswith("healthy info on stderr"))
    assert by_message[info] == ("stderr", "")  # a healthy stderr line is not red
    assert by_message["WARNING:tensorflow:a warning on stderr"] == ("stderr", "warning")
    assert by_message["Traceback (most recent call last):"] == ("stderr", "traceback")
    assert by_message["    main()"] == ("stderr", "traceback")
    assert by_message["ValueError: a caught error on stderr"] == ("stderr", "error")
    assert by_message["workerpool0-0: training finished"] == ("stdout", "")
    assert ' err"' not in page and 'class="msg err' not in page  # no colour by stream is left


def test_a_diff_is_shown_line_by_line(app, api, tokens):
    body = template_body("t")
    api.template("t", body["spec"], parameters=body["parameters"], description="first")
    r = api.c.put("/v1/templates/t", json={"spec": trainer_spec(workers=3), "parameters": body["parameters"],
                                           "description": "three workers"})
    assert r.status_code == 200
    page = new_client(app, tokens["viewer"]).get("/ui/templates/t/diff?a=1&b=2").text
    pre = re.search(r'<pre class="code diff"[^>]*>(.*?)</pre>', page, re.S).group(1)
    rows = pre.split("\n")
    assert rows[0] == '<span class="file">--- version 1</span>'
    assert rows[1] == '<span class="file">+++ version 2</span>'
    assert all(row.count("<") == 2 for row in rows if row), "one element a line"
    assert sum(row.startswith("<del>") for row in rows) >= 2 and sum(row.startswith("<ins>") for row in rows) >= 2


def test_chart_titles_are_svg_titles_that_label_their_charts(app, noisy, tokens):
    page = new_client(app, tokens["viewer"]).get(f"/ui/jobs/{noisy['id']}").text
    assert "&lt;title" not in page
    labelled = re.findall(r'<svg class="chart"[^>]* aria-labelledby="([^"]+)"', page)
    assert labelled == ["chart-loss-title", "chart-accuracy-title"]
    for ref in labelled:
        title = re.search(rf'<title id="{ref}">([^<]+)</title>', page)
        assert title, ref
    assert re.search(r'<title id="chart-loss-title">loss by epoch: loss 0.5, val_loss 0.6</title>', page)


def test_times_are_utc_in_the_html_for_the_browser_to_localize(app, noisy, tokens):
    page = new_client(app, tokens["viewer"]).get(f"/ui/jobs/{noisy['id']}").text
    started = re.search(r'<dt>Started</dt><dd><time datetime="([^"]+)" title="([^"]+)" data-local>', page)
    at = datetime.fromisoformat(started.group(1).replace("Z", "+00:00"))
    assert at.isoformat().startswith(noisy["started_at"][:19])
    assert started.group(2) == at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert len(re.findall(r'<time class="ts" datetime="[^"]+Z" title="[^"]+ UTC" data-local="time">', page)) >= 6


def test_a_users_own_cancel_is_a_notice_not_an_error(app, api, tokens, tmp_path):
    body = template_body("sleeper", wait_file=str(tmp_path / "never"), workers=0)
    api.template("sleeper", body["spec"], parameters=body["parameters"])
    job = api.submit("sleeper")
    api.wait_state(job["id"], "RUNNING")
    c = new_client(app, tokens["member"])
    assert 'id="cancel"' in c.get(f"/ui/jobs/{job['id']}").text
    r = c.post(f"/ui/jobs/{job['id']}/cancel", data={"csrf": csrf_of(c.get("/ui/jobs").text)})
    assert r.status_code == 200 and 'id="notice"' in r.text
    # Whether it is still CANCELLING or CANCELLED: no Cancel button, a neutral notice, no error box.
    assert 'id="cancel"' not in r.text and 'id="job-error"' not in r.text and 'role="alert"' not in r.text
    assert re.search(r'id="job-cancelled".*Cancelled by member-alice@alpha', r.text, re.S)
    api.wait_state(job["id"], "CANCELLED")
    page = c.get(f"/ui/jobs/{job['id']}").text
    assert "<h2>Cancelled</h2>" in page and 'id="job-error"' not in page and 'id="cancel"' not in page
    assert api.job(job["id"])["error"]  # the backend's record stays in the API


def test_search_and_my_jobs(app, api, tokens):
    body = template_body("sleeper", wait_file="/nonexistent/never", workers=0)
    api.template("sleeper", body["spec"], parameters=body["parameters"])
    admins = api.submit("sleeper", display_name="Resnet-Big")
    member = Api(TestClient(app, headers=bearer(tokens["member"])))
    mine = member.submit("sleeper", display_name="bert small")
    c = new_client(app, tokens["member"])

    def rows(url: str) -> list[str]:
        r = c.get(url)
        assert r.status_code == 200, r.text
        return re.findall(r'<tr data-job-id="([^"]+)"', r.text)

    assert rows("/ui/jobs") == [mine["id"], admins["id"]]
    assert rows("/ui/jobs?q=resnet") == [admins["id"]]
    assert rows("/ui/jobs?q=%20BERT%20") == [mine["id"]]
    assert rows("/ui/jobs?q=sleeper") == [mine["id"], admins["id"]]  # the template's name
    assert rows(f"/ui/jobs?q={admins['id']}") == [admins["id"]]
    assert rows("/ui/jobs?q=50%25") == []  # LIKE's wildcards are text
    assert rows("/ui/jobs?mine=true") == [mine["id"]]
    assert rows("/ui/jobs?mine=true&q=resnet") == []
    page = c.get("/ui/jobs?mine=true&q=bert").text
    assert 'id="mine" checked' in page and 'value="bert"' in page and "Clear filters" in page
    assert c.get("/ui/jobs?q=" + "x" * 201).status_code == 422
    for j in (admins, mine):
        api.c.post(f"/v1/jobs/{j['id']}/cancel")


def test_a_local_job_names_its_output_folder_and_the_tensorboard_command(app, noisy, tokens):
    page = new_client(app, tokens["viewer"]).get(f"/ui/jobs/{noisy['id']}").text
    folder = html.unescape(re.search(r'<code id="output-dir">([^<]+)</code>', page).group(1))
    command = html.unescape(re.search(r'<code id="tensorboard-command">([^<]+)</code>', page).group(1))
    assert folder.endswith("/output/") and command == f"tensorboard --logdir {folder}logs/"


@pytest.mark.parametrize("name, message", [("epochs", "enter a value (the default is 3)"),
                                           ("learning_rate", "enter a value (the default is 0.01)")])
def test_a_blank_number_is_refused_not_taken_as_the_default(app, api, tokens, name, message):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    r = c.post("/ui/templates/typed/launch", data=launch_form(c, "typed", action="launch", **{f"param.{name}": " "}))
    assert r.status_code == 422
    error = re.search(rf'id="param-{name}-error">([^<]+)</p>', r.text)
    assert error and html.unescape(error.group(1)) == message
    assert re.search(rf'id="param-{name}" name="param.{name}" value=" "[^>]*required', r.text)
    assert api.c.get("/v1/jobs").json()["items"] == []


def test_the_preview_names_the_job_launch_makes_with_its_cost_and_a_launch_button(app, api, tokens):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    preview = c.post("/ui/templates/typed/launch", data=launch_form(c, "typed", action="preview"))
    assert preview.status_code == 200
    named = html.unescape(re.search(r'<strong id="preview-name">([^<]+)</strong>', preview.text).group(1))
    assert re.fullmatch(r"typed-[0-9a-f]{8}", named)
    cost = html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<p id="preview-cost">(.*?)</p>', preview.text, re.S).group(1)))
    dry = api.c.post("/v1/jobs?dry_run=true", json={"template": "typed", "backend": "local"}).json()["cost"]
    # In cents, as prices are read (issue 37); the API keeps six decimals.
    assert f"{dry['currency']} {Decimal(dry['per_hour']).quantize(Decimal('0.01'))} an hour" in cost
    assert "an estimate, not a bill" in cost and "Vertex AI's default" in cost
    assert "pd-ssd" not in cost  # the shipped table prices the boot disks too (T4s it has not, in us-central1)
    assert re.search(r'<button type="submit" form="launch-form" name="action" value="launch" id="launch-previewed">',
                     preview.text)
    # The launch button beside the preview posts the same form: the job has the previewed name.
    launched = c.post("/ui/templates/typed/launch", data={**form_values(preview.text), "action": "launch"},
                      follow_redirects=False)
    assert launched.status_code == 303, launched.text
    job = api.job(launched.headers["location"].split("/ui/jobs/")[1].split("?")[0])
    assert job["display_name"] == named
    api.c.post(f"/v1/jobs/{job['id']}/cancel")


def test_the_settings_a_template_lets_members_change_are_fields(app, api, tokens):
    body = template_body("typed", workers=2)
    body["spec"]["overridable"] = ["workers.replica_count", "workers.machine_type", "workers.accelerator_type",
                                   "workers.accelerator_count", "chief.machine_type"]
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    page = c.get("/ui/templates/typed/launch").text
    names = re.findall(r'name="(set\.[\w.]+)"', page)
    assert names == ["set.chief.machine_type", "set.workers.replica_count", "set.workers.machine_type",
                     "set.workers.accelerator_type", "set.workers.accelerator_count"]
    form = form_values(page)
    assert (form["set.workers.replica_count"], form["set.workers.machine_type"], form["set.workers.accelerator_type"]) \
        == ("2", "n1-standard-8", "NVIDIA_TESLA_T4")
    machines = re.findall(r'<option value="([^"]+)"', page.split('id="set-chief-machine_type"')[1].split("</select>")[0])
    assert "n1-standard-4" in machines and "n1-standard-16" in machines  # the price table's, and the template's
    assert '<option value="">none</option>' in page.split('id="set-workers-accelerator_type"')[1].split("</select>")[0]

    # Fields and advanced JSON together: the JSON is applied over the fields; the preview shows both.
    r = c.post("/ui/templates/typed/launch", data={**form, "action": "preview", "set.workers.replica_count": "3",
                                                   "set.chief.machine_type": "n1-standard-8",
                                                   "overrides": '{"workers": {"machine_type": "n1-standard-16"}}'})
    assert r.status_code == 200, r.text
    assert re.search(r'<td>workerpool0</td><td>chief</td><td>1</td><td class="machine">n1-standard-8</td>', r.text)
    assert re.search(r'<td>workerpool1</td><td>worker</td><td>3</td><td class="machine">n1-standard-16</td>', r.text)
    # A blank count is refused beside its field; a bad one is the service's refusal beside it too.
    r = c.post("/ui/templates/typed/launch", data={**form, "action": "launch", "set.workers.replica_count": ""})
    assert r.status_code == 422 and "enter a number (the template&#39;s is 2)" in r.text.split('id="set-workers-replica_count-error"')[1]
    r = c.post("/ui/templates/typed/launch", data={**form, "action": "launch", "set.workers.accelerator_count": "0"})
    assert r.status_code == 422, r.text
    assert 'id="set-workers-accelerator_count-error"' in r.text or 'id="set-workers-accelerator_type-error"' in r.text
    assert api.c.get("/v1/jobs").json()["items"] == []
    # Launched: the job's overrides are what the fields changed.
    r = c.post("/ui/templates/typed/launch", data={**form, "action": "launch", "set.workers.replica_count": "1"},
               follow_redirects=False)
    assert r.status_code == 303, r.text
    job = api.job(r.headers["location"].split("/ui/jobs/")[1].split("?")[0])
    assert job["overrides"] == {"workers": {"replica_count": 1}}
    again = c.get(f"/ui/templates/typed/launch?from={job['id']}").text
    assert form_values(again)["set.workers.replica_count"] == "1"
    api.c.post(f"/v1/jobs/{job['id']}/cancel")
