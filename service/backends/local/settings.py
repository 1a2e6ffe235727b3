"""The local backend's slice of the settings: exactly what it reads, nothing else.

Built from the service's TRAINJOBS_* settings in one place (entry.py, the backend's declaration),
so the backend never sees the whole configuration (database URL, tokens, other backends')
and a test builds one without a database or an app. No defaults here: the service's
settings own them (service/core/config.py), so they are stated once."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class LocalSettings:
    work_dir: Path                            # TRAINJOBS_LOCAL_WORK_DIR (resolved): one run folder per job
    python: str | None                        # TRAINJOBS_LOCAL_PYTHON; None: the service's interpreter
    max_running_jobs: int                     # TRAINJOBS_LOCAL_MAX_RUNNING_JOBS; 0 holds every job QUEUED
    max_replicas_per_job: int                 # TRAINJOBS_LOCAL_MAX_REPLICAS_PER_JOB
    cancel_grace_seconds: float               # TRAINJOBS_LOCAL_CANCEL_GRACE_SECONDS: SIGTERM, then SIGKILL
    isolate_replicas: bool                    # TRAINJOBS_LOCAL_ISOLATE_REPLICAS: own uid per job (as root)
    sandbox: Literal["namespaces", "none"]    # TRAINJOBS_LOCAL_SANDBOX
    sandbox_shared_dirs: tuple[Path, ...]     # TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS
    replica_uid_base: int                     # TRAINJOBS_LOCAL_REPLICA_UID_BASE
    replica_uid_count: int                    # TRAINJOBS_LOCAL_REPLICA_UID_COUNT
    max_processes_per_job: int                # TRAINJOBS_LOCAL_MAX_PROCESSES_PER_JOB (the job's cgroup)
    sandbox_idle_seconds: float               # TRAINJOBS_LOCAL_SANDBOX_IDLE_SECONDS: an orphaned init ends
