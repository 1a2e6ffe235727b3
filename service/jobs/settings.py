"""What submitting and following jobs need of the settings, built by service/slices.py.
No defaults here: the one Settings (service/core/config.py) holds and documents them."""
from __future__ import annotations

from dataclasses import dataclass

from service.jobs.epochs import EpochLimits


@dataclass(frozen=True)
class JobSettings:
    default_backend: str       # TRAINJOBS_DEFAULT_BACKEND
    epochs: EpochLimits        # TRAINJOBS_JOB_EPOCHS_*
