"""`trainjobs templates apply|get|list|versions`: a new version only when the
spec changed, with the diff shown."""
from __future__ import annotations

import json

import yaml

from tests.cli.conftest import template_file
from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE


def versions(cli) -> list[int]:
    return [v["version"] for v in json.loads(cli("templates", "versions", "tiny", "-o", "json").stdout)]


def test_apply_creates_then_only_writes_changes(cli, tmp_path):
    path = template_file(tmp_path)
    created = cli("templates", "apply", "-f", str(path))
    assert created.returncode == 0, created.stderr
    assert "created (version 1)" in created.stderr and "+description: a chief" in created.stdout

    same = cli("templates", "apply", "-f", str(path))
    assert same.returncode == 0 and "unchanged (version 1)" in same.stderr and same.stdout == ""
    assert versions(cli) == [1]

    path.write_text(path.read_text().replace("replica_count: 1", "replica_count: 3"))
    dry = cli("templates", "apply", "-f", str(path), "--dry-run")
    assert "would become version 2" in dry.stderr and "+    replica_count: 3" in dry.stdout
    assert versions(cli) == [1]

    changed = cli("templates", "apply", "-f", str(path))
    assert "version 2 written (was 1)" in changed.stderr
    diff = changed.stdout.splitlines()
    assert "-    replica_count: 1" in diff and "+    replica_count: 3" in diff
    assert sum(1 for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---")) == 2  # only that line
    assert versions(cli) == [1, 2]

    # JSON works as well as YAML; the same content is the same template.
    as_json = tmp_path / "tiny.json"
    as_json.write_text(json.dumps(yaml.safe_load(path.read_text())))
    report = json.loads(cli("templates", "apply", "-f", str(as_json), "-o", "json").stdout)
    assert (report["action"], report["version"], report["diff"]) == ("unchanged", 2, "")


def test_get_prints_a_file_apply_takes_back(cli, tmp_path):
    cli("templates", "apply", "-f", str(template_file(tmp_path)))
    got = cli("templates", "get", "tiny")
    assert got.returncode == 0 and got.stdout.startswith("# tiny version 1 of 1")
    copy = tmp_path / "copy.yaml"
    copy.write_text(got.stdout)
    assert "unchanged" in cli("templates", "apply", "-f", str(copy)).stderr
    listed = cli("templates", "list")
    assert "tiny" in listed.stdout and "a chief that reports epochs" in listed.stdout
    assert [t["name"] for t in json.loads(cli("templates", "list", "-o", "json").stdout)] == ["tiny"]
    assert json.loads(cli("templates", "get", "tiny", "-o", "json").stdout)["spec"]["workers"]["replica_count"] == 1


def test_bad_files_are_refused_clearly(cli, tmp_path):
    odd = tmp_path / "odd.yaml"
    odd.write_text("name: x\nspec: {}\nversion: 3\n")
    r = cli("templates", "apply", "-f", str(odd))
    assert r.returncode == 2 and "unknown key(s) version" in r.stderr
    odd.write_text("name: [unclosed\n")
    r = cli("templates", "apply", "-f", str(odd))
    assert r.returncode == 2 and "neither valid YAML nor JSON" in r.stderr
    odd.write_text("name: x\nspec:\n  container: {image_uri: ''}\n  chief: {replica_count: 2}\n")
    r = cli("templates", "apply", "-f", str(odd))
    assert r.returncode == 2 and "422" in r.stderr and "spec.container.image_uri" in r.stderr
    r = cli("templates", "apply", "-f", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "cannot read" in r.stderr
