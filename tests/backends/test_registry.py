"""Issue 35, point 1: the backend registry. Each backend package declares itself once (its
entry.py); the service builds what TRAINJOBS_BACKENDS enables, importing only those; nothing
above the backends names one (the import contract in pyproject.toml, and a scan here for the
comparisons an import contract cannot see)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from service.backends import registry
from service.backends.local.entry import ENTRY as LOCAL
from service.lifecycle.protocol import Backend
from service.slices import Settings, make_backends

ROOT = Path(__file__).resolve().parents[2]


def test_the_packaged_backends_are_known_without_importing_them():
    code = ("import sys; from service.backends import registry; print(registry.known()); "
            "print(sorted(m for m in sys.modules if m.startswith('service.backends.') and "
            "m != 'service.backends.registry'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True).stdout.splitlines()
    assert out == ["['local', 'sim', 'slurm', 'vertex']", "[]"]


def test_only_the_enabled_backends_are_imported(tmp_path):
    # Every backend's settings section is part of the one Settings (its variables are read and
    # documented whether it is enabled or not): its declaration (entry.py), that section (pydantic
    # fields only) and its package's lazy __init__ are all a disabled backend loads.
    code = ("import sys; from service.slices import Settings, make_backends; "
            f"b = make_backends(Settings(database_url='sqlite:///{tmp_path}/db.sqlite')); "
            "print(sorted(b), sorted(m for m in sys.modules if m.startswith(('service.backends.vertex', "
            "'service.backends.slurm', 'google.cloud.aiplatform'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    declared = [f"service.backends.{b}{m}" for b in ("slurm", "vertex") for m in ("", ".entry", ".settings")]
    assert out.stdout.strip() == f"['local'] {declared}", out.stderr[-2000:]


def test_an_unknown_name_builds_nothing_and_says_what_is_known(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", backends=["local", "kubernetes"])
    with pytest.raises(ValueError, match=r"unknown backend 'kubernetes' .* known: local, sim, slurm, vertex"):
        make_backends(settings)


def test_a_registered_backend_is_built_with_its_own_slice(tmp_path):
    built: list[object] = []

    class Named(Backend):
        name = "elsewhere"

    def factory(slice_: object) -> Backend:
        built.append(slice_)
        return Named()

    entry = registry.BackendEntry(name="elsewhere", settings=lambda s: ("slice", s.default_backend), factory=factory)
    registry.register(entry)
    try:
        registry.register(entry)   # the same entry again: harmless
        with pytest.raises(ValueError, match="already registered"):
            registry.register(registry.BackendEntry(name="elsewhere", settings=lambda s: s, factory=factory))
        with pytest.raises(ValueError, match="is the name of the backend in service.backends.local"):
            registry.register(registry.BackendEntry(name="local", settings=lambda s: s, factory=factory))
        assert "elsewhere" in registry.known()
        b = make_backends(Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", backends=["elsewhere"],
                                   default_backend="elsewhere"))
        assert isinstance(b["elsewhere"], Named) and built == [("slice", "elsewhere")]
    finally:
        registry.unregister("elsewhere")
    assert "elsewhere" not in registry.known()


def test_a_factory_that_builds_another_backend_is_refused(tmp_path):
    wrong = registry.BackendEntry(name="local", settings=LOCAL.settings, factory=lambda s: _Other())
    with pytest.raises(ValueError, match="built a backend named 'other'"):
        wrong.build(Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite"))


class _Other(Backend):
    name = "other"


# What an import contract cannot see: a backend's name compared or spelled as a module path.
_NAMED = re.compile(r"""(==|!=|\bin\b)\s*\(?\s*["'](local|vertex|slurm|sim)["']|["'](local|vertex|slurm|sim)["']\s*(==|!=)|"""
                    r"""service\.backends\.(local|vertex|slurm|sim)\b""")


def test_nothing_above_the_backends_names_one():
    offenders = []
    for path in sorted((ROOT / "service").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("service/backends/") or "__pycache__" in rel:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _NAMED.search(code):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == []
