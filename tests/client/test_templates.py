"""Templates through the client: create, read, versions, update, apply, archive."""
from __future__ import annotations

import pytest

from tests.client.conftest import TINY_PARAMETERS, replica_spec, tiny_spec
from tests.conftest import ONE_DATABASE
from trainjobs_client import Client, Conflict, Forbidden, InvalidRequest

pytestmark = ONE_DATABASE


def test_crud_and_versions(tj):
    first = tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS, description="first")
    assert (first.name, first.version, first.latest_version, first.description) == ("tiny", 1, 1, "first")
    assert first.spec["chief"]["replica_count"] == 1  # stored with defaults filled in
    with pytest.raises(Conflict):
        tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS)
    second = tj.templates.update("tiny", replica_spec("--exit", "0"), description="second")
    assert (second.version, second.latest_version) == (2, 2)
    assert tj.templates.get("tiny").description == "second"
    assert tj.templates.get("tiny", version=1).description == "first"
    assert [(v.version, v.description) for v in tj.templates.versions("tiny")] == [(1, "first"), (2, "second")]
    assert tj.templates.archive("tiny").archived
    assert [t.name for t in tj.templates.list()] == []
    assert [t.name for t in tj.templates.list(include_archived=True)] == ["tiny"]
    with pytest.raises(Conflict):
        tj.submit("tiny")
    assert not tj.templates.unarchive("tiny").archived
    with pytest.raises(InvalidRequest) as bad:
        tj.templates.create("bad", {"container": {"image_uri": ""}})
    assert any(e.field.startswith("spec.container.image_uri") for e in bad.value.errors)


def test_list_pages(tj):
    names = [f"t{i:02d}" for i in range(7)]
    for name in reversed(names):
        tj.templates.create(name, replica_spec("--exit", "0"))
    assert [t.name for t in tj.templates.list(page_size=3)] == names


def test_apply_writes_a_version_only_when_something_changed(tj):
    stored = tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS, description="d")
    same = {"spec": stored.spec, "parameters": stored.parameters, "description": "d"}
    unchanged = tj.templates.apply("tiny", **same)
    assert unchanged.action == "unchanged" and unchanged.template.version == 1
    changed = tj.templates.apply("tiny", **{**same, "description": "new words"})
    assert (changed.action, changed.template.version, changed.previous.version) == ("updated", 2, 1)
    created = tj.templates.apply("fresh", replica_spec("--exit", "0"))
    assert (created.action, created.template.version, created.previous) == ("created", 1, None)
    assert [v.version for v in tj.templates.versions("tiny")] == [1, 2]


def test_writes_need_an_admin(server, viewer_token):
    with Client(server, viewer_token) as viewer:
        with pytest.raises(Forbidden):
            viewer.templates.create("x", replica_spec("--exit", "0"))
        assert list(viewer.templates.list()) == []
