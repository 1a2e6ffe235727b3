"""The UI's pages over HTTP, on SQLite and PostgreSQL, with real local jobs: each
page shows its data in its HTML (no JavaScript needed), roles and teams are the
API's, and the launch form reaches the same service as POST /v1/jobs."""
from __future__ import annotations

import html
import json
import re

import pytest

from tests.conftest import ONE_DATABASE
from tests.ui.conftest import csrf_of, launch_form, new_client, template_body, trainer_spec

pytestmark = ONE_DATABASE


@pytest.fixture
def finished(api) -> dict:
    """A two-replica job of the trainer stand-in that ran 4 epochs and succeeded."""
    body = template_body("demo-like")
    api.template("demo-like", body["spec"], parameters=body["parameters"], description=body["description"])
    job = api.submit("demo-like", parameters={"epochs": 4}, labels={"team": "vision"}, display_name="run-four")
    return api.wait_state(job["id"], "SUCCEEDED")


@pytest.fixture
def running(api, tmp_path):
    """A one-replica job that runs until the test ends (its replica waits for a file never made)."""
    body = template_body("sleeper", wait_file=str(tmp_path / "never"), workers=0)
    api.template("sleeper", body["spec"], parameters=body["parameters"])
    job = api.submit("sleeper", labels={"team": "nlp"})
    api.wait_state(job["id"], "RUNNING")
    yield job
    api.c.post(f"/v1/jobs/{job['id']}/cancel")


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_job_page_shows_state_charts_cluster_history_and_logs_in_its_html(app, finished, tokens):
    c = new_client(app, tokens["viewer"])
    page = c.get(f"/ui/jobs/{finished['id']}")
    assert page.status_code == 200
    h = page.text
    assert 'class="state state-SUCCEEDED"' in h
    for series in ("loss", "val_loss"):
        epochs = re.findall(rf'<circle class="pt s\d" data-series="{series}" data-epoch="(\d+)"', h)
        assert epochs == ["1", "2", "3", "4"]
    assert re.findall(r'data-series="accuracy" data-epoch="(\d+)"', h) == ["1", "2", "3", "4"]
    assert '<progress max="4" value="4"' in h and "epoch 4/4" in h
    text = _text(h)
    assert "workerpool0-0: training finished" in text and "workerpool1-0: training finished" in text
    statuses = re.findall(r'<td class="replica-status[^"]*">([^<]+)</td>', h)
    assert statuses == ["finished", "finished"]
    assert "1 × NVIDIA_TESLA_T4" in h and "n1-standard-8" in h
    assert [m for m in re.findall(r'data-state="(\w+)"', h.split('id="panel-events"')[1].split("</section>")[0])] == \
        ["QUEUED", "QUEUED", "PENDING", "PENDING", "RUNNING", "RUNNING", "SUCCEEDED"]
    assert "output/logs/" in h  # the TensorBoard folder of the local run
    # Viewers get no buttons.
    assert 'id="cancel"' not in h and 'id="launch-again"' not in h


def test_the_epochs_of_a_real_run_reach_the_api_one_row_each(api, finished):
    r = api.c.get(f"/v1/jobs/{finished['id']}/epochs")
    assert [e["epoch"] for e in r.json()["items"]] == [1, 2, 3, 4]
    assert r.json()["items"][3]["metrics"] == {"accuracy": 0.7, "loss": 0.25, "val_accuracy": 0.65, "val_loss": 0.3}


def test_the_jobs_list_shows_state_progress_and_filters(app, finished, running, tokens):
    c = new_client(app, tokens["viewer"])

    def rows(url: str) -> list[str]:
        r = c.get(url)
        assert r.status_code == 200, r.text
        return re.findall(r'<tr data-job-id="([^"]+)"', r.text)

    assert rows("/ui/jobs") == [running["id"], finished["id"]]
    assert rows("/ui/jobs?state=SUCCEEDED") == [finished["id"]]
    assert rows("/ui/jobs?state=RUNNING&state=SUCCEEDED") == [running["id"], finished["id"]]
    assert rows("/ui/jobs?template=sleeper") == [running["id"]]
    assert rows("/ui/jobs?label=team%3Dvision") == [finished["id"]]
    assert rows("/ui/jobs?label=team") == [running["id"], finished["id"]]
    assert rows("/ui/jobs?template=&label=") == [running["id"], finished["id"]]  # the filter form, left empty
    listing = c.get("/ui/jobs").text
    assert "admin-alice@alpha" in listing and "epoch 4/4" in listing and "team=vision" in listing
    bad = c.get("/ui/jobs?label=Not%20A%20Label")
    assert bad.status_code == 422 and "label" in _text(bad.text)
    assert c.get("/ui/jobs?state=NOPE").status_code == 422
    assert c.get("/ui/jobs?cursor=forged").status_code == 422


def test_pages_of_the_list_follow_the_cursor(api_client, db_url, work_dir, tokens, api):
    from tests.backends.localkit import settings_for
    body = template_body("t", workers=0)
    api.template("t", body["spec"], parameters=body["parameters"])
    ids = [api.submit("t")["id"] for _ in range(3)]
    with api_client(settings_for(db_url, work_dir, ui_page_size=2, run_reconciler=False,
                                 local_max_running_jobs=0)) as c:
        from tests.ui.conftest import sign_in
        sign_in(c, tokens["viewer"])
        first = c.get("/ui/jobs").text
        assert re.findall(r'<tr data-job-id="([^"]+)"', first) == ids[::-1][:2]
        older = html.unescape(re.search(r'id="older" href="([^"]+)"', first).group(1))
        second = c.get(older).text
        assert re.findall(r'<tr data-job-id="([^"]+)"', second) == ids[:1]
        assert 'id="older"' not in second


def test_another_teams_jobs_and_templates_are_not_found(app, finished, tokens):
    c = new_client(app, tokens["other"])
    job = finished["id"]
    assert finished["id"] not in c.get("/ui/jobs").text
    for url in (f"/ui/jobs/{job}", f"/ui/jobs/{job}/panels", f"/ui/jobs/{job}/logs.txt",
                f"/ui/jobs/{job}/logs/stream", "/ui/templates/demo-like", "/ui/templates/demo-like/diff?a=1&b=1",
                f"/ui/templates/demo-like/launch?from={job}"):
        r = c.get(url, headers={"Accept": "text/html"})
        assert r.status_code == 404, url
    r = c.post(f"/ui/jobs/{job}/cancel", data={"csrf": csrf_of(c.get("/ui/jobs").text)})
    assert r.status_code == 404
    assert c.get("/ui/jobs/not-a-uuid", headers={"Accept": "text/html"}).status_code == 404


def test_a_viewer_is_refused_launch_and_cancel_by_the_server(app, api, running, tokens):
    job = running
    c = new_client(app, tokens["viewer"])
    token = csrf_of(c.get("/ui/jobs").text)
    r = c.post(f"/ui/jobs/{job['id']}/cancel", data={"csrf": token})
    assert r.status_code == 403 and "viewer token" in _text(r.text)
    r = c.post("/ui/templates/sleeper/launch", data={"csrf": token, "action": "launch", "version": "1"})
    assert r.status_code == 403
    assert c.get("/ui/templates/sleeper/launch").status_code == 403
    assert 'href="/ui/templates/sleeper/launch' not in c.get("/ui/templates").text
    assert api.job(job["id"])["state"] == "RUNNING" and len(api.c.get("/v1/jobs").json()["items"]) == 1


def test_forms_without_the_csrf_token_change_nothing(app, api, running, tokens):
    job = running
    c = new_client(app, tokens["member"])
    assert c.post(f"/ui/jobs/{job['id']}/cancel", data={}).status_code == 403
    assert c.post(f"/ui/jobs/{job['id']}/cancel", data={"csrf": "f" * 64}).status_code == 403
    assert c.post("/ui/templates/sleeper/launch", data={"action": "launch", "version": "1"}).status_code == 403
    assert api.job(job["id"])["state"] == "RUNNING" and len(api.c.get("/v1/jobs").json()["items"]) == 1
    r = c.post(f"/ui/jobs/{job['id']}/cancel", data={"csrf": csrf_of(c.get("/ui/jobs").text)}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/ui/jobs/{job['id']}"  # its notice: a cookie
    api.wait_state(job["id"], "CANCELLED")
    assert [e["actor"] for e in api.events(job["id"]) if e["to_state"] == "CANCELLING"] == ["member-alice@alpha"]


def test_the_launch_form_is_made_from_the_typed_parameters(app, api, tokens):
    body = template_body("typed")
    body["parameters"].append({"name": "run_name", "type": "string", "description": "No default: required"})
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    h = c.get("/ui/templates/typed/launch").text
    assert re.search(r'type="number" id="param-epochs" name="param.epochs" value="3" step="1"\s+min="1" max="50"', h)
    assert re.search(r'type="number" id="param-learning_rate" name="param.learning_rate" value="0.01" step="any"', h)
    assert re.search(r'<select id="param-optimizer" name="param.optimizer"[^>]*>\s*<option selected>adam</option>'
                     r'<option>sgd</option>', h)
    assert 'type="checkbox" id="param-mixed_precision" name="param.mixed_precision" value="true">' in h
    assert re.search(r'type="text" id="param-run_name" name="param.run_name" value=""', h)
    assert "(string, required)" in h and "(1 to 50)" in h

    form = launch_form(c, "typed", **{"param.epochs": "9", "param.run_name": "sweep-7", "labels": "team=vision",
                                       "param.mixed_precision": "true", "action": "launch"})
    r = c.post("/ui/templates/typed/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, _text(r.text)
    job = api.job(r.headers["location"].split("/ui/jobs/")[1].split("?")[0])
    assert job["parameters"] == {"epochs": 9, "optimizer": "adam", "mixed_precision": True, "learning_rate": 0.01,
                                 "run_name": "sweep-7"}
    assert job["labels"] == {"team": "vision"} and job["created_by"] == "member-alice@alpha"

    # The same form sent twice (a double click, a retried post) is one job.
    again = c.post("/ui/templates/typed/launch", data=form, follow_redirects=False)
    assert again.headers["location"] == r.headers["location"]
    assert len(api.c.get("/v1/jobs").json()["items"]) == 1
    api.c.post(f"/v1/jobs/{job['id']}/cancel")


def test_launch_again_fills_the_form_with_the_jobs_values(app, api, finished, tokens):
    c = new_client(app, tokens["member"])
    page = c.get(f"/ui/jobs/{finished['id']}").text
    href = html.unescape(re.search(r'id="launch-again" href="([^"]+)"', page).group(1))
    h = c.get(href).text
    assert 'name="param.epochs" value="4"' in h
    assert ">team=vision</textarea>" in h
    assert f"/ui/jobs/{finished['id']}" in h


@pytest.mark.parametrize("fields, where, message", [
    ({"param.epochs": "500"}, "param-epochs-error", "above the maximum 50"),
    ({"param.epochs": "three"}, "param-epochs-error", "a whole number"),
    ({"param.learning_rate": "nan"}, "param-learning_rate-error", "a finite number"),
    ({"param.optimizer": "adagrad"}, "param-optimizer-error", "pick one of adam, sgd"),
    ({"overrides": "{not json"}, "overrides-error", "not valid JSON"),
    ({"overrides": '{"workers": {"replica_count": 0}}'}, "overrides-error", "spec.workers.replica_count"),
    ({"overrides": "[1]"}, "overrides-error", "must be a JSON object"),
    # Deeper than json's decoder can recurse: was a 500 (RecursionError).
    ({"overrides": "[" * 50_000 + "]" * 50_000}, "overrides-error", "nested too deeply"),
    ({"overrides": '{"a": ' * 40 + "1" + "}" * 40}, "overrides-error", "nested deeper than 16 levels"),
    # Keys with spaces are the service's own (sweep trials'): a form cannot send one.
    ({"idempotency_key": "trainjobs sweep 1 trial 1"}, "form-errors", "not one this page made"),
    ({"labels": "no equals sign"}, "labels-error", "line 1: write key=value"),
    ({"labels": "Bad=ok"}, "labels-error", "Bad: label keys are 1-64 lowercase letters"),
    ({"backend": "vertex"}, "backend-error", "not enabled on this service"),
])
def test_a_bad_launch_is_shown_beside_its_field_and_launches_nothing(app, api, tokens, fields, where, message):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    r = c.post("/ui/templates/typed/launch", data=launch_form(c, "typed", action="launch", **fields))
    assert r.status_code == 422, _text(r.text)[:2000]
    block = r.text.split(f'id="{where}"', 1)[1].split("</p>" if where != "form-errors" else "</div>", 1)[0]
    assert message in html.unescape(block), block
    assert api.c.get("/v1/jobs").json()["items"] == []


def test_an_override_a_member_may_not_make_is_refused_beside_its_field(app, api, tokens):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    r = c.post("/ui/templates/typed/launch", data=launch_form(
        c, "typed", action="launch", overrides='{"container": {"command": ["sh", "-c", "id"]}}'))
    assert r.status_code == 403, _text(r.text)[:2000]
    block = r.text.split('id="overrides-error"', 1)[1].split("</p>", 1)[0]
    assert "does not let members change it" in html.unescape(block), block
    assert api.c.get("/v1/jobs").json()["items"] == []


def test_the_preview_is_the_apis_dry_run(app, api, tokens):
    body = template_body("typed", workers=2)
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    r = c.post("/ui/templates/typed/launch",
               data=launch_form(c, "typed", action="preview", overrides='{"workers": {"replica_count": 3}}'))
    assert r.status_code == 200, _text(r.text)[:2000]
    dry = api.c.post("/v1/jobs?dry_run=true", json={"template": "typed", "backend": "local",
                                                    "overrides": {"workers": {"replica_count": 3}}}).json()
    shown = {m.group(1): json.loads(html.unescape(m.group(2))) for m in re.finditer(
        r'<details class="replica-config" data-task="([^"]+)"[^>]*>.*?<pre class="code">(.*?)</pre>', r.text, re.S)}
    expected = {}
    for replica in dry["cluster"]:
        config = json.loads(replica["env"]["TF_CONFIG"])
        config.pop("job")
        expected[replica["task_name"]] = config
    assert shown == expected and len(shown) == 4
    assert re.search(r"<td>workerpool1</td><td>worker</td><td>3</td>", r.text)
    assert api.c.get("/v1/jobs").json()["items"] == []


def test_template_versions_render_and_diff(app, api, tokens):
    body = template_body("t")
    api.template("t", body["spec"], parameters=body["parameters"], description="first")
    r = api.c.put("/v1/templates/t", json={"spec": trainer_spec(workers=3), "parameters": body["parameters"],
                                           "description": "three workers"})
    assert r.status_code == 200
    c = new_client(app, tokens["viewer"])
    v1 = c.get("/ui/templates/t?version=1").text
    assert "first" in v1 and "(latest is v2)" in v1 and "n1-standard-8" in v1
    diff = c.get("/ui/templates/t/diff?a=1&b=2")
    assert diff.status_code == 200
    dels = [html.unescape(x) for x in re.findall(r"<del>(.*?)</del>", diff.text)]
    ins = [html.unescape(x) for x in re.findall(r"<ins>(.*?)</ins>", diff.text)]
    assert any('"replica_count": 1' in d for d in dels) and any('"replica_count": 3' in i for i in ins)
    assert any('"description": "first"' in d for d in dels) and any('"description": "three workers"' in i for i in ins)
    assert c.get("/ui/templates/t/diff?a=1&b=9").status_code == 404
    assert c.get("/ui/templates/t/diff?a=1").status_code == 422


def test_logs_download_as_text_per_replica(app, finished, tokens):
    c = new_client(app, tokens["viewer"])
    r = c.get(f"/ui/jobs/{finished['id']}/logs.txt")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert "attachment" in r.headers["content-disposition"]
    assert "workerpool0-0 stdout: workerpool0-0: training finished" in r.text
    assert "workerpool1-0: training finished" in r.text
    only = c.get(f"/ui/jobs/{finished['id']}/logs.txt?replica=workerpool1-0").text
    assert "workerpool1-0: training finished" in only and "workerpool0-0" not in only
    assert c.get(f"/ui/jobs/{finished['id']}/logs.txt?replica=nope").status_code == 422


def test_the_log_stream_is_the_apis_follow_stream(app, api, finished, tokens):
    c = new_client(app, tokens["viewer"])
    with c.stream("GET", f"/ui/jobs/{finished['id']}/logs/stream") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        ui = [ln for ln in r.iter_lines() if ln.startswith(("event:", "data:", "id:"))]
    with api.c.stream("GET", f"/v1/jobs/{finished['id']}/logs?follow=true") as r:
        apis = [ln for ln in r.iter_lines() if ln.startswith(("event:", "data:", "id:"))]
    assert ui == apis and ui[-2] == "event: end"
    # Resuming after the third line sends what follows it.
    third = [ln for ln in ui if ln.startswith("id:")][2][4:]
    with c.stream("GET", f"/ui/jobs/{finished['id']}/logs/stream", headers={"Last-Event-ID": third}) as r:
        resumed = [ln for ln in r.iter_lines() if ln.startswith(("event:", "data:", "id:"))]
    assert resumed == ui[9:]


def test_the_feed_streams_the_teams_changes_since_the_page_was_made(app, api, finished, tokens, client):
    before = finished["created_at"]
    mine = new_client(app, tokens["viewer"])
    with mine.stream("GET", f"/ui/stream?since={before}") as r:
        events = _sse(r)
    changes = [json.loads(data) for kind, data in events if kind == "job"]
    assert changes and changes[-1]["id"] == finished["id"] and changes[-1]["state"] == "SUCCEEDED"
    assert changes[-1]["epoch"] == 4 and changes[-1]["epochs"] == 4
    theirs = new_client(app, tokens["other"])
    with theirs.stream("GET", f"/ui/stream?since={before}") as r:
        assert [e for e in _sse(r) if e[0] == "job"] == []


def _sse(response) -> list[tuple[str, str]]:
    """(event, data) pairs until the stream ends (TRAINJOBS_UI_STREAM_MAX_SECONDS)."""
    out, kind = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            out.append((kind, line[6:]))
    return out


def test_versions_too_long_to_diff_on_a_page_say_so(api_client, db_url, work_dir, api, tokens):
    from tests.backends.localkit import settings_for
    from tests.ui.conftest import sign_in
    body = template_body("t")
    api.template("t", body["spec"], parameters=body["parameters"])
    with api_client(settings_for(db_url, work_dir, ui_diff_max_lines=10, run_reconciler=False)) as c:
        sign_in(c, tokens["viewer"])
        r = c.get("/ui/templates/t/diff?a=1&b=1")
        assert r.status_code == 200 and 'id="diff-too-long"' in r.text and "<ins>" not in r.text


def test_unknown_ui_addresses_are_a_not_found_page(app, client, tokens):
    c = new_client(app, tokens["viewer"])
    r = c.get("/ui/no/such/page", headers={"Accept": "text/html"})
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "no such page" in r.text and "viewer-alice@alpha" in r.text
    assert c.get("/ui/static/ui.css").status_code == 200
    assert c.get("/ui/static/nope.css").status_code == 404
