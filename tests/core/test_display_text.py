"""Names and descriptions people read (display names, descriptions of templates, their
parameters, webhooks and imports) refuse control characters and bidirectional overrides
with a 422 that names the character (SQLite and PostgreSQL). Labels were letters and
digits already."""
from __future__ import annotations

import copy

import pytest

from tests.apikit import DEMO, assert_problem

HOSTILE = ["train\x1b]52;c;cm0gLXJmIH4=\x07",   # OSC 52: writes the reader's clipboard
           "ok\x1b[1A\x1b[2Kforged line",        # cursor up, erase: hides the line above
           "invoice-\u202egnp.exe",               # shows as invoice-exe.png
           "a\rb", "a\nb", "c1\x9b2J", "iso\u2066late"]   # (NUL: refused as unstorable, schema_base)


def _where(body: dict, field: str) -> str:
    [error] = [e for e in body["errors"] if e["field"].endswith(field)]
    return error["message"]


@pytest.mark.parametrize("name", HOSTILE)
def test_display_names_refuse_control_and_bidi_characters(client, demo, name):
    # Through the submit's lean path (a plain JSON body) and the full one (?dry_run).
    for params in ({}, {"dry_run": "true"}):
        body = assert_problem(client.post("/v1/jobs", params=params, json={"template": "mwms-demo",
                                                                           "display_name": name}), 422)
        assert "U+" in _where(body, "display_name") and "control or bidirectional" in body["detail"] + str(body)
    r = client.post("/v1/sweeps", json={"template": "mwms-demo", "algorithm": "grid", "display_name": name,
                                         "parameters": {"epochs": {"values": [1]}},
                                         "objective": {"metric": "val_accuracy", "goal": "maximize"}})
    assert "U+" in _where(assert_problem(r, 422), "display_name")
    assert client.get("/v1/jobs").json()["items"] == []


def test_relaunch_refuses_them_too(client, demo):
    r = client.post("/v1/jobs", json={"template": "mwms-demo", "display_name": "fine name é 日本"})
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["display_name"] == "fine name é 日本"
    r = client.post(f"/v1/jobs/{job['id']}/relaunch", json={"display_name": "x\x1b[2J"})
    assert "U+001B" in _where(assert_problem(r, 422), "display_name")


@pytest.mark.parametrize("text", ["\x1b[2J", "a\u202eb", "\x07bell", "tab\tand\nnewline are fine\x7f"])
def test_descriptions_refuse_them_but_keep_tabs_and_newlines(client, text):
    body = copy.deepcopy(DEMO)
    body["description"] = text
    assert "U+" in _where(assert_problem(client.post("/v1/templates", json=body), 422), "description")
    body = copy.deepcopy(DEMO)
    body["parameters"][0]["description"] = text
    assert "U+" in _where(assert_problem(client.post("/v1/templates", json=body), 422), "description")
    r = client.post("/v1/webhooks", json={"url": "https://8.8.8.8/hook", "description": text})
    assert "U+" in _where(assert_problem(r, 422), "description")
    r = client.post("/v1/templates:import", json={"format": "worker-pool-specs", "description": text,
                                                   "source": ["machine-type=n1-standard-4,container-image-uri=i:1"]})
    assert "U+" in _where(assert_problem(r, 422), "description")


def test_tabs_and_newlines_in_a_description_are_kept(client):
    body = copy.deepcopy(DEMO)
    body["description"] = "line one\n\tline two"
    r = client.post("/v1/templates", json=body)
    assert r.status_code == 201, r.text
    assert client.get("/v1/templates/mwms-demo").json()["description"] == "line one\n\tline two"
