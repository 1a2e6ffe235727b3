"""`Allow` is per path (RFC 9110, 10.2.1): a 405 lists every method of the path, and OPTIONS
answers 204 with that list for any path that exists (service/web/methods.py, docs/http.md,
"Methods"). Before, a 405 listed the methods of the one route it hit: `OPTIONS /v1/jobs`
answered 405 with `Allow: POST`, GET missing."""
from __future__ import annotations

import uuid

import pytest

from tests.apikit import assert_problem

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
UNUSED = ("PATCH", "DELETE", "PUT", "POST", "GET")


def _concrete(path: str) -> str:
    return path.format(job_id=uuid.uuid4(), token_id=uuid.uuid4(), webhook_id=uuid.uuid4(),
                       delivery_id=uuid.uuid4(), sweep_id=uuid.uuid4(), name="mwms-demo", team="alpha",
                       backend="local")


def _allow(response) -> set[str]:
    return {m.strip() for m in response.headers["allow"].split(",")}


def test_every_405_lists_every_method_of_its_path(client):
    paths = client.app.openapi()["paths"]
    checked = 0
    for path, item in paths.items():
        documented = {m.upper() for m in item}
        method = next(m for m in UNUSED if m not in documented)
        r = client.request(method, _concrete(path))
        body = assert_problem(r, 405)
        assert _allow(r) == documented | {"OPTIONS"}, (method, path, r.headers["allow"])
        assert method in body["detail"] and "OPTIONS" in body["detail"]
        checked += 1
    assert checked == len(paths) >= 30


def test_options_answers_204_with_allow_without_a_token(client):
    for path, item in client.app.openapi()["paths"].items():
        r = client.options(_concrete(path), headers={"Authorization": ""})
        assert r.status_code == 204 and r.content == b"", (path, r.status_code, r.text)
        assert _allow(r) == {m.upper() for m in item} | {"OPTIONS"}, (path, r.headers["allow"])


def test_options_of_a_path_that_does_not_exist_is_404(client):
    assert_problem(client.options("/v1/no-such-thing"), 404)
    assert_problem(client.options("/v1/jobs/x/y/z"), 404)


def test_allow_spans_paths_outside_the_api_document(client):
    """The docs pages and the UI are routes too: one rule for every path of the app."""
    r = client.post("/docs")
    assert_problem(r, 405)
    assert _allow(r) == {"GET", "OPTIONS"}
    r = client.options("/healthz")
    assert r.status_code == 204 and _allow(r) == {"GET", "OPTIONS"}
