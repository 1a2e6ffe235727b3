"""What submitting and following jobs need of the settings, built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from service.core.section import Section
from service.jobs.epochs import EpochLimits


@dataclass(frozen=True)
class JobSettings:
    default_backend: str       # TRAINJOBS_DEFAULT_BACKEND
    epochs: EpochLimits        # TRAINJOBS_JOB_EPOCHS_*


class JobsEnv(Section):
    """Submitting jobs (the submit's caches) and following their epochs."""

    template_cache_size: int = Field(
        256, ge=0, le=100_000, description="Template versions each API process keeps parsed and checked for "
                                           "submits (versions never change; 0: parse on every submit), and "
                                           "as many templates' last read heads, which a repeat submit checks in "
                                           "its one writing statement instead of reading them first")
    compile_cache_bytes: int = Field(
        16 * 1024 * 1024, ge=0, le=1 << 34,
        description="JSON bytes of compiled jobs each API process keeps, so that a submit of the same template "
                    "version with the same parameters and overrides reuses the compile and the price (0: "
                    "compile every submit); one job above a tenth of it is not kept")
    job_epochs_max_per_job: int = Field(1000, ge=1, le=1_000_000, description="Epochs kept per job: the "
                                        "latest this many; older rows are dropped as new ones arrive")
    job_epochs_max_metrics: int = Field(64, ge=1, le=1000, description="Metrics kept per epoch (by name); "
                                        "the rest of a larger dict is dropped")
