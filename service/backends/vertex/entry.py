"""The vertex backend's declaration (service/backends/registry.py): its name, its settings
section (VertexEnv: its TRAINJOBS_* variables), the slice cut from the service's settings by field
name (VertexSettings) and its factory. Importing it loads
no Google client library: the backend's modules are imported when it is built."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.backends.registry import BackendEntry
from service.backends.vertex.settings import VertexEnv

if TYPE_CHECKING:
    from service.backends.vertex.settings import VertexSettings
    from service.lifecycle.protocol import Backend


def vertex_settings_of(s: Any) -> VertexSettings:
    from service.backends.vertex.settings import VertexSettings

    return VertexSettings.model_validate(s)   # by field name: only its slice


def _build(settings: VertexSettings) -> Backend:
    from service.backends.vertex.backend import VertexBackend

    return VertexBackend(settings)


ENTRY = BackendEntry(name="vertex", settings=vertex_settings_of, factory=_build, section=VertexEnv)
