"""Finding a job or sweep by what a person types (issue 25, point 2): GET /v1/jobs takes
`id_prefix` (a range of the primary key) and `name`, on SQLite and PostgreSQL; the
client's resolve() turns a prefix or a name into one id, or says which ones match."""
from __future__ import annotations

import httpx
import pytest

from service.core.pagination import id_range
from tests.client.conftest import replica_spec
from tests.conftest import bearer
from trainjobs_client import Ambiguous, InvalidRequest, NoMatch


def test_id_prefix_and_name_filter_every_page(tj):
    tj.templates.create("quick", replica_spec("--exit", "0"))
    first = tj.submit("quick", display_name="first-run")
    later = [tj.submit("quick") for _ in range(2)]
    # The first job is not on the first page of one: the filters are applied by the query.
    assert next(iter(tj.list(page_size=1))).id != first.id
    digits = first.id.hex
    for prefix in (digits[:4], digits[:8], digits[:31], digits, digits[:12].upper(), str(first.id)[:13]):
        found = list(tj.list(id_prefix=prefix, page_size=1))
        assert first.id in [j.id for j in found], prefix
        assert all(j.id.hex.startswith(prefix.replace("-", "").lower()) for j in found)
    assert [j.id for j in tj.list(name="first-run", page_size=1)] == [first.id]
    assert list(tj.list(name="first-ru")) == []  # a name matches whole, not as a prefix
    assert tj.resolve("first-run") == str(first.id)
    assert tj.resolve(digits[:8]) == str(first.id)
    assert tj.resolve(str(later[0].id)) == str(later[0].id)


def test_a_name_shared_by_several_jobs_is_ambiguous_and_lists_them(tj):
    tj.templates.create("quick", replica_spec("--exit", "0"))
    a = tj.submit("quick", display_name="nightly")
    b = tj.relaunch(a)  # a relaunch keeps the name
    with pytest.raises(Ambiguous) as e:
        tj.resolve("nightly")
    assert [c.id for c in e.value.candidates] == [b.id, a.id] and not e.value.more
    assert "matches 2 jobs" in str(e.value)
    with pytest.raises(NoMatch, match="no job has an id starting with 'nothing-here'"):
        tj.resolve("nothing-here")
    with pytest.raises(NoMatch, match="at least 4 hex digits"):
        tj.resolve(a.id.hex[:3])


def test_bad_filters_are_422_naming_the_parameter(server, token):
    with httpx.Client(base_url=server, headers=bearer(token)) as http:
        for params in ({"id_prefix": "3f2"}, {"id_prefix": "xyz12"}, {"id_prefix": "a" * 33},
                       {"id_prefix": "3f2a-"}, {"name": ""}, {"name": "n" * 129}):
            r = http.get("/v1/jobs", params=params)
            assert r.status_code == 422, (params, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert list(params)[0] in r.text
        assert http.get("/v1/sweeps", params={"id_prefix": "12"}).status_code == 422
        # The process's first document is built now: ~1 s of CPU, over httpx's 5 s on a loaded host.
        schema = http.get("/openapi.json", timeout=60).json()["paths"]["/v1/jobs"]["get"]["parameters"]
        assert {"id_prefix", "name"} <= {p["name"] for p in schema}


def test_the_client_refuses_what_the_service_would(tj):
    with pytest.raises(InvalidRequest):
        list(tj.list(id_prefix="12"))


@pytest.mark.parametrize("prefix", ["0000", "ffff", "3f2a9", "0123456789abcdef0123456789abcdef"])
def test_the_range_holds_exactly_the_ids_with_the_prefix(prefix):
    low, high = id_range(prefix)
    assert low.hex.startswith(prefix) and high.hex.startswith(prefix)
    assert low.hex == prefix.ljust(32, "0") and high.hex == prefix.ljust(32, "f")
