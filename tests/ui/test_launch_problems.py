"""The launch form shows every problem of a launch at once (issue 25): its own (text that is
not a number, overrides that are not JSON) beside the service's checks of the rest."""
from __future__ import annotations

import html
import json
import re

from tests.conftest import ONE_DATABASE
from tests.ui.conftest import launch_form, new_client, template_body

pytestmark = ONE_DATABASE


def _beside(page: str, where: str) -> str:
    return html.unescape(page.split(f'id="{where}"', 1)[1].split("</p>", 1)[0])


def test_overrides_that_are_not_json_do_not_hold_back_a_bad_parameter(app, api, tokens):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["admin"])
    r = c.post("/ui/templates/typed/launch", data=launch_form(
        c, "typed", action="launch", overrides="{not json", **{"param.epochs": "500"}))
    assert r.status_code == 422
    assert "above the maximum 50" in _beside(r.text, "param-epochs-error")
    overrides = _beside(r.text, "overrides-error")
    assert "not valid JSON" in overrides and "not checked" in overrides
    assert "a merge patch over the template spec" not in overrides   # the form says it already: no echo
    assert api.c.get("/v1/jobs").json()["items"] == []


def test_every_mistake_shows_beside_its_field_in_one_answer(app, api, tokens):
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["admin"])
    overrides = {"chief": {"replica_count": 2}, "workers": {"replica_count": 0, "machine_type": "n9-giant-7"}}
    r = c.post("/ui/templates/typed/launch", data=launch_form(
        c, "typed", action="launch", overrides=json.dumps(overrides),
        **{"param.epochs": "500", "param.learning_rate": "fast"}))
    assert r.status_code == 422
    assert "a number" in _beside(r.text, "param-learning_rate-error")        # the form's
    assert "above the maximum 50" in _beside(r.text, "param-epochs-error")   # the service's, with it
    shown = _beside(r.text, "overrides-error")
    for field in ("spec.workers.replica_count", "spec.chief.replica_count", "spec.workers.machine_type"):
        assert field in shown, shown
    assert api.c.get("/v1/jobs").json()["items"] == []


def _text_box(page: str, name: str) -> str:
    m = re.search(rf'<textarea id="{name}"[^>]*>(.*?)</textarea>', page, re.S)
    assert m, f"no {name} text box"
    return html.unescape(m.group(1))


def test_text_boxes_come_back_exactly_after_a_preview_and_a_refusal(app, api, tokens):
    """Issue 37: browsers post a text box's line breaks as CRLF; each preview or refusal showed
    them back with a visible `\\x0d` more, and the launch beside the preview then failed."""
    body = template_body("typed")
    api.template("typed", body["spec"], parameters=body["parameters"])
    c = new_client(app, tokens["member"])
    labels, overrides = "owner=newcomer\nteam=vision", '{\n  "workers": {"replica_count": 2}\n}'
    crlf = lambda text: text.replace("\n", "\r\n")  # noqa: E731  (what a browser posts)
    form = launch_form(c, "typed", labels=crlf(labels), overrides=crlf(overrides), action="preview")
    for _ in range(2):
        r = c.post("/ui/templates/typed/launch", data=form)
        assert r.status_code == 200, r.text
        assert (_text_box(r.text, "labels"), _text_box(r.text, "overrides")) == (labels, overrides)
        assert "x0d" not in r.text
        form = {**form, "labels": crlf(_text_box(r.text, "labels")), "overrides": crlf(_text_box(r.text, "overrides"))}
    r = c.post("/ui/templates/typed/launch", data={**form, "param.epochs": ""})  # refused: shown again
    assert r.status_code == 422
    assert (_text_box(r.text, "labels"), _text_box(r.text, "overrides")) == (labels, overrides)
    r = c.post("/ui/templates/typed/launch", data={**form, "action": "launch"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    job = api.job(r.headers["location"].split("/ui/jobs/")[1].split("?")[0])
    assert job["labels"] == {"owner": "newcomer", "team": "vision"}
    assert job["overrides"] == {"workers": {"replica_count": 2}}
