"""What the import and export endpoints need of the settings (TRAINJOBS_IMPORT_*, and the
Vertex project and region an export names), built by service/slices.py.
No defaults here: the one Settings (service/core/config.py) holds and documents them."""
from __future__ import annotations

from dataclasses import dataclass

from service.interop.safe_yaml import YamlLimits


@dataclass(frozen=True)
class InteropSettings:
    yaml: YamlLimits
    vertex_location: str
    vertex_project: str | None
