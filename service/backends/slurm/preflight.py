"""What `serve` (and the app's start-up) checks of the cluster itself before it listens:
the controller answers, and the partitions the settings name exist there. One Slurm
call (`sinfo`); a broken cluster or setting is refused by name, never left to make every
job wait in QUEUED for ever. A cluster that goes away later is a job's waiting_reason
(the backend's transient errors), not this."""
from __future__ import annotations

import stat
from pathlib import Path

from service.backends.owned_tree import prepare_shared_root
from service.backends.slurm.cli import SlurmCli
from service.backends.slurm.config import SlurmConfig
from service.lifecycle.protocol import PermanentBackendError, TransientBackendError


def cluster_problems(cli: SlurmCli) -> list[str]:
    cfg = cli.cfg
    where = f"TRAINJOBS_SLURM_CONF={cfg.conf}" if cfg.conf else "the Slurm clients' default slurm.conf"
    try:
        partitions = cli.partitions()
    except (TransientBackendError, PermanentBackendError) as e:
        said = " ".join(str(e).split())[:400]
        return [f"the Slurm cluster of {where} does not answer ({said}): start slurmctld, or point "
                "TRAINJOBS_SLURM_CONF at the cluster's slurm.conf"]
    problems = []
    named = [("TRAINJOBS_SLURM_PARTITION", cfg.partition)] if cfg.partition else []
    named += [("TRAINJOBS_SLURM_ALLOWED_PARTITIONS", p) for p in cfg.allowed_partitions]
    for setting, name in named:
        if name not in partitions:
            problems.append(f"{setting} names partition {name!r}, which the cluster of {where} does not have "
                            f"(it has: {', '.join(partitions) or 'none'})")
    return problems


def folder_problems(cfg: SlurmConfig, work_dir: Path, as_job_user: bool) -> list[str]:
    """The run folders (and the shared output folder, if set) made, the service's, 0711: tasks pass
    through to their own folder and list nothing; with a job user, every folder above them must let
    others pass too."""
    work_dir.mkdir(parents=True, exist_ok=True)
    work_dir.chmod(0o711)
    folders = {"TRAINJOBS_SLURM_WORK_DIR": work_dir}
    problems = []
    if cfg.shared_output_dir is not None:
        try:
            prepare_shared_root(cfg.shared_output_dir)
        except (ValueError, OSError) as e:
            problems.append(f"TRAINJOBS_SLURM_SHARED_OUTPUT_DIR={cfg.shared_output_dir}: {e}")
        folders["TRAINJOBS_SLURM_SHARED_OUTPUT_DIR"] = cfg.shared_output_dir
    for variable, folder in folders.items() if as_job_user else ():
        closed = next((p for p in folder.parents if not p.stat().st_mode & stat.S_IXOTH), None)
        if closed is not None:
            problems.append(f"jobs run as {cfg.job_user} and cannot reach {variable}={folder}: {closed} is not "
                            f"searchable by others (chmod o+x {closed}, or choose another folder)")
    return problems
