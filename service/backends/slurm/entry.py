"""The slurm backend's declaration (service/backends/registry.py): its name, its settings
section (SlurmEnv: the TRAINJOBS_SLURM_* variables), the slice cut from them (SlurmConfig) and its factory."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.backends.registry import BackendEntry
from service.backends.slurm.settings import SlurmEnv

if TYPE_CHECKING:
    from service.backends.slurm.config import SlurmConfig
    from service.lifecycle.protocol import Backend


def slurm_config_of(s: Any) -> SlurmConfig:
    """The slice, from the service's settings (read by attribute: this package does not import
    the global config)."""
    from service.backends.slurm.config import DEFAULT_PATH, SlurmConfig

    return SlurmConfig(
        conf=s.slurm_conf, bin_path=str(s.slurm_bin_dir) if s.slurm_bin_dir else DEFAULT_PATH,
        work_dir=Path(s.slurm_work_dir) if s.slurm_work_dir else None,
        python=s.slurm_python, job_user=s.slurm_job_user, team_users=dict(s.slurm_team_users), partition=s.slurm_partition,
        account=s.slurm_account, qos=s.slurm_qos, allowed_partitions=tuple(s.slurm_allowed_partitions),
        allowed_accounts=tuple(s.slurm_allowed_accounts), allowed_qos=tuple(s.slurm_allowed_qos),
        team_accounts=dict(s.slurm_team_accounts), priority_qos=dict(s.slurm_priority_qos), requeue=s.slurm_requeue,
        cpus_per_task=s.slurm_cpus_per_task, mem_per_cpu_mb=s.slurm_mem_per_cpu_mb,
        max_running=s.slurm_max_running_jobs, command_timeout=s.slurm_command_timeout_seconds,
        poll_interval=s.slurm_poll_interval_seconds, rendezvous_timeout=s.slurm_rendezvous_timeout_seconds,
        shared_output_dir=Path(s.slurm_shared_output_dir).resolve() if s.slurm_shared_output_dir else None)


def _build(cfg: SlurmConfig) -> Backend:
    from service.backends.slurm.backend import SlurmBackend

    return SlurmBackend(cfg)


def _runs_trainer(s: Any) -> str:
    return (f"python -m trainer.task with TRAINJOBS_SLURM_PYTHON={s.slurm_python}, "
            "4 CPUs a task unless TRAINJOBS_SLURM_CPUS_PER_TASK says")


ENTRY = BackendEntry(name="slurm", settings=slurm_config_of, factory=_build, runs_trainer=_runs_trainer,
                     section=SlurmEnv)
