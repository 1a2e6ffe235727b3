"""The vertex backend: jobs run as Vertex AI CustomJobs (backend.py maps its parts).

The backend's names load on first use (PEP 562): importing a small module of this package
(entry.py, which the registry reads when the vertex backend is enabled) must not load Google's
client libraries (~70 MB) before the backend is built."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.backends.vertex.backend import VertexBackend
    from service.backends.vertex.config import VertexConfigError
    from service.backends.vertex.settings import VertexSettings

__all__ = ["VertexBackend", "VertexConfigError", "VertexSettings"]

_HOMES = {"VertexBackend": "service.backends.vertex.backend", "VertexConfigError": "service.backends.vertex.config",
          "VertexSettings": "service.backends.vertex.settings"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
