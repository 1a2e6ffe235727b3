"""The backend registry: the one place the service learns which backends exist.

A backend is one package, `service/backends/<name>/`, whose `entry.py` declares it once with a
`BackendEntry` named `ENTRY`: its name, its settings section (its TRAINJOBS_* variables, which
`sections()` hands the composition root to join into the one Settings), how its slice is cut
from the service's settings, and the factory that builds it from that slice. Nothing else in
the service names a backend: the composition root (service/slices.py `make_backends`) builds each backend that
TRAINJOBS_BACKENDS enables through `build`, and the layers above talk to the built objects
through the roles of lifecycle/protocol.py only.

Entries are found two ways, both lazily (a service without Vertex never imports Google's
client libraries):

- a package of service/backends/ with an `entry.py`: found by its folder name, its entry module
  imported only when the settings enable it (adding a backend there touches no other file of
  service/);
- `register(entry)`: a backend that lives elsewhere (a plugin, the tests' fourth backend in
  tests/backends/fourth/) registers its entry before the app is built. The bar is Dagster's
  RunLauncher: one class plus one line that names it.

The shared-capacity scheduler (issue 38) adds its per-backend hooks here and in the roles of
lifecycle/protocol.py: a backend's capacity is a fact of its built object (beside
`capabilities`), the demand of a compiled job and a graceful stop are methods of a role of
their own that a backend may implement; `BackendEntry` stays the one declaration."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from service.lifecycle.protocol import Backend

SliceT = TypeVar("SliceT")

_PACKAGE = "service.backends"
_registered: dict[str, BackendEntry[Any]] = {}


@dataclass(frozen=True)
class BackendEntry(Generic[SliceT]):
    """A backend's one declaration.

    `settings`: the service's settings (read by attribute, so no backend imports the global
    config) -> this backend's slice, the only configuration it is given; the slice's fields say
    which TRAINJOBS_* variables it reads. `factory`: slice -> the backend. Both import the
    backend's modules inside, so naming the entry loads nothing heavy."""

    name: str
    settings: Callable[[Any], SliceT]
    factory: Callable[[SliceT], Backend]
    # What it runs for a template whose image is the trainer's, in words, when that is not the
    # image itself (a backend that runs no containers); None: it runs the image.
    runs_trainer: Callable[[Any], str] | None = None
    # Its TRAINJOBS_* variables: a Section (service/core/section.py) in its package's settings.py,
    # joined into the service's Settings whether the backend is enabled or not (read and checked
    # at start, listed in docs/settings.md); `settings` then cuts the slice from that Settings.
    section: type | None = None

    def build(self, settings: Any) -> Backend:
        backend = self.factory(self.settings(settings))
        if backend.name != self.name:
            raise ValueError(f"the {self.name!r} backend's factory built a backend named {backend.name!r}")
        return backend


class UnknownBackend(ValueError):
    pass


def register(entry: BackendEntry[Any]) -> None:
    """Make a backend that lives outside service/backends/ known by its name. Registering the
    same entry twice is harmless; another entry under a taken name is refused."""
    known = _registered.get(entry.name)
    if known is not None and known is not entry:
        raise ValueError(f"a backend named {entry.name!r} is already registered")
    if known is None and entry.name in _packaged():
        raise ValueError(f"{entry.name!r} is the name of the backend in {_PACKAGE}.{entry.name}")
    _registered[entry.name] = entry


def unregister(name: str) -> None:
    """Forget a registered backend (a test's, once it is done)."""
    _registered.pop(name, None)


def known() -> list[str]:
    """Every backend name the service could build, without importing any backend."""
    return sorted(set(_packaged()) | set(_registered))


def entry(name: str) -> BackendEntry[Any]:
    if name in _registered:
        return _registered[name]
    if name not in _packaged():
        raise UnknownBackend(f"unknown backend {name!r} in TRAINJOBS_BACKENDS; known: {', '.join(known())}")
    declared = importlib.import_module(f"{_PACKAGE}.{name}.entry").ENTRY
    if not isinstance(declared, BackendEntry) or declared.name != name:
        raise UnknownBackend(f"{_PACKAGE}.{name}.entry.ENTRY does not declare the backend {name!r}")
    return declared


def build(names: Iterable[str], settings: Any) -> dict[str, Backend]:
    """The backends `names` (TRAINJOBS_BACKENDS), each given only its own slice. Every name is
    checked before any backend is built, so a typo builds nothing."""
    entries = [entry(name) for name in names]
    return {e.name: e.build(settings) for e in entries}


def sections() -> list[type]:
    """The settings section of every packaged backend, enabled or not, for the composition root
    to join into the one Settings. Imports each entry.py, which loads declarations only."""
    return [e.section for e in (entry(name) for name in _packaged()) if e.section is not None]


def _packaged() -> list[str]:
    """The subpackages of service/backends/ that declare a backend (an entry.py), by folder name."""
    here = Path(__file__).parent
    return [m.name for m in pkgutil.iter_modules([str(here)])
            if m.ispkg and (here / m.name / "entry.py").is_file()]
