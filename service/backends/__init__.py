"""Backend registry: the enabled backends, built from settings."""
from __future__ import annotations

from service.core.config import Settings
from service.lifecycle.protocol import Backend

KNOWN = ("local", "vertex", "slurm")


def make_backends(settings: Settings) -> dict[str, Backend]:
    backends: dict[str, Backend] = {}
    for name in settings.backends:
        if name == "local":
            from service.backends.local import LocalBackend
            backends[name] = LocalBackend(settings)
        elif name == "vertex":
            from service.backends.vertex import VertexBackend, VertexSettings
            backends[name] = VertexBackend(VertexSettings.model_validate(settings))   # only its slice
        elif name == "slurm":
            from service.backends.slurm import SlurmBackend
            backends[name] = SlurmBackend.from_settings(settings)   # only its own slice (SlurmConfig)
        else:
            raise ValueError(f"unknown backend {name!r} in TRAINJOBS_BACKENDS; known: {', '.join(KNOWN)}")
    if settings.default_backend not in backends:
        raise ValueError(f"TRAINJOBS_DEFAULT_BACKEND={settings.default_backend!r} is not enabled "
                         f"(TRAINJOBS_BACKENDS={settings.backends})")
    return backends
