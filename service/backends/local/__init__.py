"""The local backend: one OS process per replica. backend.py's docstring maps its modules
in the order of a job's life (settings, runs, launcher, supervisor, backend); docs/local.md
describes it for operators.

The backend's names load on first use (PEP 562): the composition root imports this package's
settings.py (its TRAINJOBS_LOCAL_* variables) in every service, and that must not load the
backend where it is not enabled."""
from __future__ import annotations

from typing import TYPE_CHECKING

from service.backends import lazy

if TYPE_CHECKING:
    from service.backends.local.backend import LocalBackend
    from service.backends.local.settings import LocalSettings

__all__ = ["LocalBackend", "LocalSettings"]

_HOMES = {"LocalBackend": "service.backends.local.backend", "LocalSettings": "service.backends.local.settings"}

__getattr__ = lazy.names(__name__, _HOMES)
