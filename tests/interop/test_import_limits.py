"""Untrusted YAML: size, aliases, expansion, depth, duplicate keys and Python tags
are refused with a 422 that says which setting bounds them (SQLite and PostgreSQL)."""
from __future__ import annotations

import pytest

from tests.conftest import ONE_DATABASE
from tests.interop.conftest import assert_problem

pytestmark = ONE_DATABASE

BASE = "scaleTier: CUSTOM\nmasterType: n1-standard-4\nmasterConfig: {imageUri: 'img:1'}\n"


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"import_max_bytes": 4096})


def post(client, source):
    return client.post("/v1/templates:import", json={"format": "aiplatform-config", "source": source})


def laughs(levels: int, fanout: int) -> str:
    lines = ['l0: &l0 "ha"']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fanout)}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_while_composed(client):
    # Refused at the fourth level (9**4 values), before its 51st alias.
    body = assert_problem(post(client, laughs(9, 9)), 422, "source")
    assert "TRAINJOBS_IMPORT_MAX_YAML_NODES" in body["errors"][0]["fix"]


def test_aliases_are_counted(client):
    body = assert_problem(post(client, BASE + "l0: &l0 x\nl: [" + ", ".join(["*l0"] * 51) + "]\n"), 422, "source")
    assert "TRAINJOBS_IMPORT_MAX_YAML_ALIASES" in body["errors"][0]["fix"]


def test_expansion_is_bounded_even_with_few_aliases(client):
    body = assert_problem(post(client, laughs(5, 9)), 422, "source")  # 45 aliases, 9**5 values
    assert "TRAINJOBS_IMPORT_MAX_YAML_NODES" in body["errors"][0]["fix"]


def test_size_depth_duplicates_and_tags(client):
    big = BASE + "args: [" + ", ".join(["'--x'"] * 1000) + "]\n"
    assert "TRAINJOBS_IMPORT_MAX_BYTES" in assert_problem(post(client, big), 422, "source")["errors"][0]["fix"]
    assert "deeper than 32" in assert_problem(post(client, "a: " + "[" * 40 + "]" * 40 + "\n"), 422,
                                              "source")["errors"][0]["message"]
    dup = assert_problem(post(client, BASE + "masterType: standard\n"), 422, "source")
    assert "appears twice" in dup["errors"][0]["message"]
    assert "not valid YAML" in assert_problem(post(client, "!!python/object/apply:os.system ['true']\n"), 422,
                                              "source")["errors"][0]["message"]
    assert "not valid YAML" in assert_problem(post(client, "a: [1\n"), 422, "source")["errors"][0]["message"]


def test_anchors_and_merge_keys_within_bounds_work(client):
    source = ("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n"
              "  masterConfig: &cfg {imageUri: 'img:1', containerArgs: [--role, any]}\n"
              "  workerType: n1-standard-4\n  workerCount: 2\n  workerConfig:\n    <<: *cfg\n"
              "    containerArgs: [--role, worker]\n")
    r = post(client, source)
    assert r.status_code == 200, r.text
    spec = r.json()["spec"]
    assert spec["container"]["args"] == ["--role", "any"]
    assert spec["workers"]["container"] == {"args": ["--role", "worker"], "env": {}}
