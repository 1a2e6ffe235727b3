"""The slurm backend: jobs run as heterogeneous Slurm jobs on a team's own cluster (see backend.py).

The backend's names load on first use (PEP 562): the composition root imports this package's
settings.py (its TRAINJOBS_SLURM_* variables) in every service, Slurm enabled or not, and that
must not load the backend."""
from __future__ import annotations

from typing import TYPE_CHECKING

from service.backends import lazy

if TYPE_CHECKING:
    from service.backends.slurm.backend import SlurmBackend
    from service.backends.slurm.config import SlurmConfig, SlurmConfigError

__all__ = ["SlurmBackend", "SlurmConfig", "SlurmConfigError"]

_HOMES = {"SlurmBackend": "service.backends.slurm.backend", "SlurmConfig": "service.backends.slurm.config",
          "SlurmConfigError": "service.backends.slurm.config"}

__getattr__ = lazy.names(__name__, _HOMES)
