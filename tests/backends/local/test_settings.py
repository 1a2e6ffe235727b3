"""The local and slurm backends are given their slices of the settings (LocalSettings,
SlurmConfig), never the global Settings: every field of LocalSettings is the global
setting local_<field> (the same TRAINJOBS_LOCAL_* variable), the builder maps one to the
other, and neither package imports the global config."""
import ast
import dataclasses
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.backends.local import LocalBackend, LocalSettings
from service.slices import Settings, make_backends

BACKENDS = Path(__file__).resolve().parents[3] / "service" / "backends"


def test_every_field_of_the_local_slice_is_a_global_local_setting():
    missing = {f.name for f in dataclasses.fields(LocalSettings)} - \
        {name.removeprefix("local_") for name in Settings.model_fields if name.startswith("local_")}
    assert not missing, f"not TRAINJOBS_LOCAL_* settings: {sorted(missing)}"


def test_the_builder_gives_the_local_backend_its_slice_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINJOBS_LOCAL_CANCEL_GRACE_SECONDS", "7.5")
    monkeypatch.setenv("TRAINJOBS_LOCAL_MAX_REPLICAS_PER_JOB", "3")
    monkeypatch.setenv("TRAINJOBS_LOCAL_SANDBOX_IDLE_SECONDS", "42")
    settings = Settings(database_url="sqlite://", backends=["local"], default_backend="local",
                        local_work_dir=tmp_path / "runs")
    backend = make_backends(settings)["local"]
    assert isinstance(backend, LocalBackend) and type(backend.settings) is LocalSettings
    assert backend.settings.cancel_grace_seconds == 7.5 and backend.settings.max_replicas_per_job == 3
    assert backend.settings.work_dir == (tmp_path / "runs").resolve()
    assert backend.settings.replica_uid_base == settings.local_replica_uid_base
    assert backend.settings.sandbox_idle_seconds == 42.0


@pytest.mark.parametrize("value", ["0", "0.5", "-1", "86401"])
def test_a_sandbox_idle_time_out_of_bounds_is_refused(monkeypatch, value):
    """An orphaned sandbox must end within a bounded time, and not before a launch can join it."""
    monkeypatch.setenv("TRAINJOBS_LOCAL_SANDBOX_IDLE_SECONDS", value)
    with pytest.raises(ValidationError, match="local_sandbox_idle_seconds"):
        Settings(database_url="sqlite://")


def test_the_local_and_slurm_packages_do_not_import_the_global_config():
    offenders = []
    for path in sorted([*(BACKENDS / "local").glob("*.py"), *(BACKENDS / "slurm").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("service.core.config")]
            if isinstance(node, ast.ImportFrom) and node.module == "service.core" and \
                    any(a.name == "config" for a in node.names):
                offenders.append(f"{path.name}: from service.core import config")
    assert offenders == []
