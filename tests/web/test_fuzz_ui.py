"""The fuzz run extended to the web UI (issue 22): its forms and pages, described as an
OpenAPI document here (the UI is not in the API's schema), are driven by schemathesis
against a real server as a signed-in member with a valid CSRF token, so that inputs reach
the form handling itself. No input may cause a 5xx."""
import re

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.conftest import ONE_DATABASE
from tests.web.test_fuzz import EXAMPLES

pytestmark = ONE_DATABASE

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def sign_in(base: str, token: str) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=base, timeout=30)
    page = c.get("/ui/login")
    r = c.post("/ui/login", data={"csrf": CSRF.search(page.text).group(1), "token": token, "next": "/ui/jobs"})
    assert r.status_code == 303, r.text
    launch = c.get("/ui/templates/mwms-demo/launch")
    assert launch.status_code == 200, launch.text
    return c, CSRF.search(launch.text).group(1)


def _text(**extra) -> dict:
    return {"type": "string", "maxLength": 300, **extra}


def ui_schema(csrf: str, job_id: str) -> dict:
    form = lambda props, required=("csrf",): {  # noqa: E731
        "required": True, "content": {"application/x-www-form-urlencoded": {"schema": {
            "type": "object", "properties": props, "required": list(required)}}}}
    name = {"name": "name", "in": "path", "required": True,
            "schema": {"enum": ["mwms-demo", "mwms-demo", "mwms-demo", "no-such-template", "Bad Name"]}}
    job = {"name": "job_id", "in": "path", "required": True,
           "schema": {"enum": [job_id, job_id, "00000000-0000-0000-0000-000000000000", "not-a-uuid"]}}
    query = lambda n, schema=None: {"name": n, "in": "query", "required": False, "schema": schema or _text()}  # noqa
    ok = {"default": {"description": "a page, a redirect or a problem"}}
    # Path values are picked from a few (the forms are what is fuzzed); the CSRF token is the session's.
    launch_form = {"csrf": {"enum": [csrf]}, "version": {"anyOf": [{"enum": ["1"]}, _text()]},
                   "action": {"enum": ["launch", "check", "", "other"]}, "backend": _text(),
                   "display_name": _text(), "labels": _text(), "overrides": _text(maxLength=2000),
                   "idempotency_key": _text(), "param.epochs": _text(), "param.steps_per_epoch": _text(),
                   "param.batch_size": _text(), "param.learning_rate": _text()}
    return {
        "openapi": "3.0.3", "info": {"title": "trainjobs UI forms", "version": "1"},
        "paths": {
            "/ui/templates/{name}/launch": {
                "get": {"parameters": [name, query("version"), query("from")], "responses": ok},
                "post": {"parameters": [name], "requestBody": form(launch_form), "responses": ok}},
            "/ui/jobs/{job_id}/cancel": {"post": {"parameters": [job], "requestBody": form(
                {"csrf": {"enum": [csrf, csrf, "é", ""]}}), "responses": ok}},
            "/ui/login": {"get": {"parameters": [query("next")], "responses": ok},
                          "post": {"requestBody": form({"csrf": _text(), "token": _text(), "next": _text()},
                                                       required=()), "responses": ok}},
            "/ui/jobs": {"get": {"parameters": [
                query("state", {"type": "array", "items": _text()}), query("template"), query("label"),
                query("cursor")], "responses": ok}},
            "/ui/jobs/{job_id}": {"get": {"parameters": [job], "responses": ok}},
            "/ui/jobs/{job_id}/panels": {"get": {"parameters": [job], "responses": ok}},
            "/ui/jobs/{job_id}/logs.txt": {"get": {"parameters": [job], "responses": ok}},
            "/ui/templates": {"get": {"parameters": [query("cursor")], "responses": ok}},
            "/ui/templates/{name}": {"get": {"parameters": [name, query("version")], "responses": ok}},
            "/ui/templates/{name}/diff": {"get": {"parameters": [name, query("a"), query("b")], "responses": ok}},
        }}


def test_no_input_breaks_the_ui(live_server, demo_live, tokens):
    job = httpx.post(f"{live_server}/v1/jobs", json={"template": "mwms-demo"},
                     headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert job.status_code == 201, job.text
    browser, csrf = sign_in(live_server, tokens["member"])
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    schema = schemathesis.openapi.from_dict(ui_schema(csrf, job.json()["id"]))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 12
    tried, statuses = {}, {}
    for op in operations:
        count = 0

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            nonlocal count
            count += 1
            response = case.call_and_validate(base_url=live_server, headers={"Cookie": cookie},
                                              checks=[not_a_server_error], timeout=30, allow_redirects=False)
            statuses.setdefault(op.label, set()).add(response.status_code)

        run()
        tried[op.label] = count
    print(tried, statuses)
    assert all(n > 0 for n in tried.values()), tried
    # The forms were reached as a signed-in member, not turned away at the door.
    assert statuses["POST /ui/templates/{name}/launch"] & {200, 303, 422}, statuses
    # And the session still works: the fuzzing did not sign it out or break it.
    assert browser.get("/ui/jobs").status_code == 200


def test_explicit_hostile_form_inputs_get_their_4xx(live_server, demo_live, tokens):
    """Inputs that once gave the UI a 500, each with the answer it must get."""
    browser, csrf = sign_in(live_server, tokens["member"])
    # A non-ASCII CSRF token (hmac.compare_digest refuses such str: a TypeError).
    assert browser.post("/ui/login", data={"csrf": "é", "token": "x"}).status_code == 403
    assert browser.post("/ui/logout", data={"csrf": "日本"}).status_code == 403
    # Overrides deeper than json's decoder recurses (a RecursionError).
    r = browser.post("/ui/templates/mwms-demo/launch", data={"csrf": csrf, "version": "1", "action": "launch",
                                                            "overrides": "[" * 50_000 + "]" * 50_000})
    assert r.status_code == 422 and "nested too deeply" in r.text
