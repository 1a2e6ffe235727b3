"""The vertex backend is given its slice of the settings (VertexSettings), never the
global Settings: every field of the slice is a setting of the same name (its own section's,
VertexEnv, or the service's `workers`), the builder maps one to the other, and the package does
not import the global config at all."""
import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.backends.vertex import VertexBackend, VertexSettings
from service.backends.vertex.settings import VertexEnv
from service.slices import Settings, make_backends

PACKAGE = Path(__file__).resolve().parents[2] / "service" / "backends" / "vertex"


def test_every_field_of_the_slice_is_a_global_setting_of_the_same_name():
    missing = set(VertexSettings.model_fields) - set(Settings.model_fields)
    assert not missing, f"not global settings (no TRAINJOBS_* variable): {sorted(missing)}"


def test_the_builder_gives_the_vertex_backend_its_slice_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRAINJOBS_VERTEX_POLL_INTERVAL_SECONDS", "42")
    monkeypatch.setenv("TRAINJOBS_LOGS_FOLLOW_SHARE", "0.25")
    settings = Settings(database_url="sqlite://", backends=["vertex"], default_backend="vertex")
    backend = make_backends(settings)["vertex"]
    assert isinstance(backend, VertexBackend)
    assert type(backend.settings) is VertexSettings
    assert backend.settings.vertex_poll_interval_seconds == 42.0
    assert backend.settings.logs_follow_share == 0.25
    assert backend.settings.vertex_location == settings.vertex_location


def test_the_slice_is_the_section_and_the_one_service_value_it_needs():
    # Defaults and limits are stated once, in the section (VertexEnv); the slice adds only the
    # service's project, region and API workers (which divide the Cloud Logging budget), which a
    # cut without them refuses.
    assert set(VertexSettings.model_fields) == set(VertexEnv.model_fields) | {"workers", "vertex_project",
                                                                              "vertex_location"}
    with pytest.raises(ValidationError, match="workers"):
        VertexSettings.model_validate({"vertex_location": "us-central1"})


def test_the_vertex_package_does_not_import_the_global_config():
    offenders = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n == "service.core.config"
                          or n.startswith("service.core.config.")]
            if isinstance(node, ast.ImportFrom) and node.module == "service.core" and \
                    any(a.name == "config" for a in node.names):
                offenders.append(f"{path.name}: from service.core import config")
    assert offenders == []
