"""Settings where their domain is (issue 50.3): each package's section declares its TRAINJOBS_*
variables once, the composition root joins them into the one Settings, docs/settings.md is the
list generated from them, and docs/DESIGN.md's recipe "A new setting" does what it says."""
from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest
from pydantic import Field

from service.cli.startup import Refusal, settings_or_refuse
from service.core.section import Section, document, sections
from service.slices import Settings, get_settings

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("settings_doc", ROOT / "scripts" / "settings_doc.py")
settings_doc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(settings_doc)

# Variables the docs name that are not the service's settings: the client's (trainjobs CLI and
# Python client), what a replica's environment carries, and the test suite's own.
NOT_SETTINGS = {"TRAINJOBS_URL", "TRAINJOBS_TOKEN", "TRAINJOBS_CONFIG", "TRAINJOBS_RECONNECT_SECONDS",
                "TRAINJOBS_EXPECTED_GPUS", "TRAINJOBS_LOCAL_REPLICA", "TRAINJOBS_SLURM_JOB_ID",
                "TRAINJOBS_SLURM_NODE", "TRAINJOBS_SLURM_RESTART_COUNT", "TRAINJOBS_TEST_PG",
                "TRAINJOBS_TEST_WORKERS", "TRAINJOBS_UI_SCREENSHOTS"}


def _variables() -> set[str]:
    return {f"TRAINJOBS_{name.upper()}" for name in Settings.model_fields}


def test_docs_settings_lists_every_variable_as_its_section_declares_it():
    page = settings_doc.DOC.read_text()
    assert settings_doc.rewritten(page, document(Settings)) == page, \
        "docs/settings.md is stale: run .venv/bin/python scripts/settings_doc.py"
    listed = set(re.findall(r"^\| `(TRAINJOBS_[A-Z0-9_]+)` \|", page, flags=re.M))
    assert listed == _variables()


def test_every_variable_the_docs_name_is_read():
    variables, named = _variables(), {}
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for name, wildcard in re.findall(r"(TRAINJOBS_[A-Z0-9_]*[A-Z0-9])(_\*)?", path.read_text()):
            known = any(v.startswith(name + "_") for v in variables) if wildcard else name in variables
            if not known and name not in NOT_SETTINGS:
                named.setdefault(name, path.name)
    assert named == {}, f"named in the docs but read by no section: {named}"


def test_every_variable_has_a_meaning_and_one_section():
    assert [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()] == []
    owners: dict[str, list[str]] = {}
    for section in sections(Settings):
        for name in vars(section).get("__annotations__", {}):
            owners.setdefault(name, []).append(section.__name__)
    assert {n: o for n, o in owners.items() if len(o) > 1} == {}   # one statement of each default
    assert set(owners) == set(Settings.model_fields)


def test_a_bad_value_names_the_variable_and_what_is_allowed(monkeypatch):
    monkeypatch.setenv("TRAINJOBS_SLURM_POLL_INTERVAL_SECONDS", "-1")   # a disabled backend's, checked too
    get_settings.cache_clear()
    try:
        with pytest.raises(Refusal, match=r"TRAINJOBS_SLURM_POLL_INTERVAL_SECONDS='-1': Input should be greater "
                                          r"than or equal to 0"):
            settings_or_refuse()
    finally:
        get_settings.cache_clear()


# --- docs/DESIGN.md's recipe "A new setting", done here with a package of the test's own ----------

class WidgetEnv(Section):
    """Widgets, a package of this test."""

    # Step 1: a field in its package's section: the variable's name without TRAINJOBS_, its
    # default, its limits and its meaning.
    widget_max_parts: int = Field(8, ge=1, le=64, description="Parts one widget may have")


@dataclasses.dataclass(frozen=True)
class WidgetSettings:       # the package's slice: what its code is handed
    max_parts: int          # TRAINJOBS_WIDGET_MAX_PARTS


class WidgetSettingsRoot(Settings, WidgetEnv):
    """Step 2: the section joined into the one Settings (a new package's section is one more base of
    service/slices.py's ServiceSettings; a new field of an existing section needs nothing here)."""


def widget_settings(s: WidgetSettingsRoot) -> WidgetSettings:
    """Step 3: the slice cut in service/slices.py, which the package is handed."""
    return WidgetSettings(max_parts=s.widget_max_parts)


def test_the_recipe_a_new_setting(monkeypatch):
    monkeypatch.setenv("TRAINJOBS_WIDGET_MAX_PARTS", "12")
    assert widget_settings(WidgetSettingsRoot()).max_parts == 12       # read from the environment, in its slice
    assert widget_settings(WidgetSettingsRoot(widget_max_parts=3)).max_parts == 3   # as tests pass it
    monkeypatch.setenv("TRAINJOBS_WIDGET_MAX_PARTS", "65")
    with pytest.raises(Refusal, match=r"TRAINJOBS_WIDGET_MAX_PARTS='65': Input should be less than or equal to 64"):
        settings_or_refuse(WidgetSettingsRoot)                          # refused at start, by name and bound
    # Step 4: docs/settings.md is stale until scripts/settings_doc.py writes the new row.
    page = settings_doc.DOC.read_text()
    regenerated = settings_doc.rewritten(page, document(WidgetSettingsRoot))
    assert regenerated != page
    assert "| `TRAINJOBS_WIDGET_MAX_PARTS` | `8` | ≥ 1, ≤ 64 | Parts one widget may have |" in regenerated
    assert "### Widgets, a package of this test (tests/core/test_settings.py)" in regenerated
