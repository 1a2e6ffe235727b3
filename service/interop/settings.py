"""What the import and export endpoints need of the settings (TRAINJOBS_IMPORT_*, and the
Vertex project and region an export names), built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from service.core.section import Section
from service.interop.safe_yaml import YamlLimits


@dataclass(frozen=True)
class InteropSettings:
    yaml: YamlLimits
    vertex_location: str
    vertex_project: str | None


class InteropEnv(Section):
    """Importing AI Platform configs and gcloud flags (POST /v1/templates:import). The source is
    untrusted text, parsed in worker processes (import_workers.py): pure-Python parsing in the API
    process held the GIL, and every other request waited for it."""

    import_max_bytes: int = Field(65_536, ge=1024, le=1_048_576, description="The largest config.yaml or gcloud "
                                  "command text an import takes (bytes, UTF-8)")
    import_max_yaml_aliases: int = Field(50, ge=0, le=10_000, description="YAML aliases (*name) an imported "
                                         "config may use; more is refused (alias bombs)")
    import_max_yaml_nodes: int = Field(5000, ge=100, le=1_000_000, description="Values in an imported config "
                                       "once its aliases are expanded; more is refused")
    import_max_yaml_depth: int = Field(32, ge=4, le=1000, description="Nesting depth of an imported config")
    import_max_yaml_expanded_bytes: int = Field(
        262_144, ge=1024, le=16_777_216, description="Bytes of text (keys and values) in an imported config once "
                                                     "its aliases and merge keys are expanded; more is refused")
    import_workers: int = Field(2, ge=1, le=64, description="Worker processes that parse imports: imports "
                                "parsed at once")
    import_queue: int = Field(8, ge=0, le=1000, description="Imports that may wait for a busy worker; more "
                              "are answered 503 with Retry-After")
    import_parse_timeout_seconds: float = Field(1.5, gt=0, le=60, description="Wall time an import may spend "
                                                "in a worker (all its parses); past it the worker is killed and "
                                                "replaced, the import answered 422")
    import_worker_memory_mb: int = Field(256, ge=64, le=16_384, description="Address space of an import worker "
                                         "(RLIMIT_AS); an import that needs more is answered 422")
    import_worker_start_seconds: float = Field(10.0, gt=0, le=120, description="How long a new import worker "
                                               "may take to start; past it the import is answered 503")
