"""The local backend's slice of the settings: exactly what it reads, nothing else.

Built from the service's TRAINJOBS_* settings in one place (entry.py, the backend's declaration),
so the backend never sees the whole configuration (database URL, tokens, other backends')
and a test builds one without a database or an app. Its variables, each with its default,
limits and meaning: `LocalEnv` below, a section of the service's one Settings (service/slices.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from service.core.section import Section


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
    shared_output_dir: Path | None = None     # TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR (resolved): job outputs there


class LocalEnv(Section):
    """The local backend (docs/local.md)."""

    local_work_dir: Path | None = Field(
        None, description="Run folders of local jobs. Default: tied to the database, not the working "
                          "directory: <db file>.runs/ for SQLite, "
                          "$XDG_DATA_HOME/trainjobs/<host>-<port>-<db>/runs for PostgreSQL")
    local_isolate_replicas: bool = Field(
        True, description="When the service runs as root, each local job's replicas run as an unprivileged "
                          "uid of their own (see docs/local.md)")
    local_replica_uid_base: int = Field(200_000, ge=1000, le=2**31 - 2, description="First uid for replicas")
    local_replica_uid_count: int = Field(1000, ge=1, le=100_000,
                                         description="uids for replicas: at most this many local jobs at once")
    local_sandbox: Literal["namespaces", "none"] = Field(
        "namespaces", description="As root: each local job in namespaces of its own (PID, network, mount, IPC, "
                                  "UTS; docs/local.md). none: replicas share the host's network and processes "
                                  "(a single-user host only; logged loudly at start)")
    local_sandbox_shared_dirs: list[Path] = Field(
        default_factory=list, description="Host folders every sandboxed local job sees (read-write, file "
                                          "permissions still apply), e.g. a dataset cache; the rest of the host "
                                          "is read-only and /tmp private")
    local_max_processes_per_job: int = Field(
        4096, ge=0, description="As root: processes (threads included) one local job may have at once, its "
                                "cgroup's pids.max (a fork bomb stops there); 0: no limit")
    local_sandbox_idle_seconds: float = Field(
        60.0, ge=1.0, le=86_400.0,
        description="As root: a job's sandbox (its namespaces' init, which holds its uid and cgroup) ends by "
                    "itself once no process of the job has run in it for this long, or once its run folder is "
                    "gone (checked every second), so a job whose service never comes back does not hold them "
                    "forever")
    local_shared_output_dir: Path | None = Field(
        None, description="A folder this host shares with other backends (the same value as "
                          "TRAINJOBS_SLURM_SHARED_OUTPUT_DIR: a filesystem the Slurm nodes see at the same path): "
                          "every local job's output goes to <folder>/<first attempt's id>, so a preempted job "
                          "that accepts both may go on on either (docs/queue.md, \"Where a preempted job goes "
                          "on\"). Default: none, outputs stay in the run folders and such a job stays local")
    local_max_running_jobs: int = Field(2, ge=0, description="Local jobs running at once; the rest wait in "
                                        "QUEUED. 0 holds every local job in QUEUED.")
    local_cancel_grace_seconds: float = Field(10.0, description="A cancelled local job's replicas get SIGTERM, "
                                              "then SIGKILL after this long")
    local_python: str | None = Field(None, description="Python that runs `python ...` commands; default: this one")
    local_max_replicas_per_job: int = Field(32, ge=1, description="Jobs with more replicas are refused locally")

    def resolved_local_work_dir(self) -> Path:
        """TRAINJOBS_LOCAL_WORK_DIR, else the folder the core ties to TRAINJOBS_DATABASE_URL (this
        section is read as part of the service's Settings, whose core section has that method)."""
        joined: Any = self
        return Path(self.local_work_dir) if self.local_work_dir else Path(joined.database_run_folders())
