"""The slurm backend: jobs run as heterogeneous Slurm jobs on a team's own cluster (see backend.py).

The backend's names load on first use (PEP 562): the composition root imports this package's
settings.py (its TRAINJOBS_SLURM_* variables) in every service, Slurm enabled or not, and that
must not load the backend."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.backends.slurm.backend import SlurmBackend
    from service.backends.slurm.config import SlurmConfig, SlurmConfigError

__all__ = ["SlurmBackend", "SlurmConfig", "SlurmConfigError"]

_HOMES = {"SlurmBackend": "service.backends.slurm.backend", "SlurmConfig": "service.backends.slurm.config",
          "SlurmConfigError": "service.backends.slurm.config"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
