"""The vertex backend: jobs run as Vertex AI CustomJobs (backend.py maps its parts).

The backend's names load on first use (PEP 562): importing a small module of this package
(entry.py, which the registry reads when the vertex backend is enabled) must not load Google's
client libraries (~70 MB) before the backend is built."""
from __future__ import annotations

from typing import TYPE_CHECKING

from service.backends import lazy

if TYPE_CHECKING:
    from service.backends.vertex.backend import VertexBackend
    from service.backends.vertex.config import VertexConfigError
    from service.backends.vertex.settings import VertexSettings

__all__ = ["VertexBackend", "VertexConfigError", "VertexSettings"]

_HOMES = {"VertexBackend": "service.backends.vertex.backend", "VertexConfigError": "service.backends.vertex.config",
          "VertexSettings": "service.backends.vertex.settings"}

__getattr__ = lazy.names(__name__, _HOMES)
