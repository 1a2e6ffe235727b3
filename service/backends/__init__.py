"""Backend registry: the enabled backends, built from settings.

The one place that reads the service's settings for a backend: each backend gets only
its own slice (LocalSettings, SlurmConfig, ...), mapped here from the same TRAINJOBS_*
names, so no backend imports service.core.config."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from service.core.config import Settings
from service.lifecycle.protocol import Backend

if TYPE_CHECKING:
    from service.backends.local.settings import LocalSettings
    from service.backends.slurm.config import SlurmConfig

KNOWN = ("local", "vertex", "slurm")


def local_settings_of(s: Settings) -> LocalSettings:
    from service.backends.local.settings import LocalSettings

    return LocalSettings(
        work_dir=Path(s.resolved_local_work_dir()).expanduser().resolve(), python=s.local_python,
        max_running_jobs=s.local_max_running_jobs, max_replicas_per_job=s.local_max_replicas_per_job,
        cancel_grace_seconds=s.local_cancel_grace_seconds, isolate_replicas=s.local_isolate_replicas,
        sandbox=s.local_sandbox, sandbox_shared_dirs=tuple(Path(p) for p in s.local_sandbox_shared_dirs),
        replica_uid_base=s.local_replica_uid_base, replica_uid_count=s.local_replica_uid_count,
        max_processes_per_job=s.local_max_processes_per_job)


def slurm_config_of(s: Settings) -> SlurmConfig:
    from service.backends.slurm.config import DEFAULT_PATH, SlurmConfig

    return SlurmConfig(
        conf=s.slurm_conf, bin_path=str(s.slurm_bin_dir) if s.slurm_bin_dir else DEFAULT_PATH,
        work_dir=Path(s.slurm_work_dir) if s.slurm_work_dir else None,
        python=s.slurm_python, job_user=s.slurm_job_user, partition=s.slurm_partition,
        account=s.slurm_account, qos=s.slurm_qos, allowed_partitions=tuple(s.slurm_allowed_partitions),
        allowed_accounts=tuple(s.slurm_allowed_accounts), allowed_qos=tuple(s.slurm_allowed_qos),
        cpus_per_task=s.slurm_cpus_per_task, mem_per_cpu_mb=s.slurm_mem_per_cpu_mb,
        max_running=s.slurm_max_running_jobs, command_timeout=s.slurm_command_timeout_seconds,
        poll_interval=s.slurm_poll_interval_seconds, rendezvous_timeout=s.slurm_rendezvous_timeout_seconds)


def make_backends(settings: Settings) -> dict[str, Backend]:
    backends: dict[str, Backend] = {}
    for name in settings.backends:
        # Imported only when enabled: a service without Slurm or Vertex never loads their code.
        if name == "local":
            from service.backends.local import LocalBackend
            backends[name] = LocalBackend(local_settings_of(settings))
        elif name == "vertex":
            from service.backends.vertex import VertexBackend, VertexSettings
            backends[name] = VertexBackend(VertexSettings.model_validate(settings))   # only its slice
        elif name == "slurm":
            from service.backends.slurm import SlurmBackend
            backends[name] = SlurmBackend(slurm_config_of(settings))
        else:
            raise ValueError(f"unknown backend {name!r} in TRAINJOBS_BACKENDS; known: {', '.join(KNOWN)}")
    if settings.default_backend not in backends:
        raise ValueError(f"TRAINJOBS_DEFAULT_BACKEND={settings.default_backend!r} is not enabled "
                         f"(TRAINJOBS_BACKENDS={settings.backends})")
    return backends
