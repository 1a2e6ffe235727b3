"""The slurm backend: jobs run as heterogeneous Slurm jobs on a team's own cluster (see backend.py)."""
from service.backends.slurm.backend import SlurmBackend
from service.backends.slurm.config import SlurmConfig, SlurmConfigError

__all__ = ["SlurmBackend", "SlurmConfig", "SlurmConfigError"]
