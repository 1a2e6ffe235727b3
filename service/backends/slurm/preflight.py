"""What `serve` (and the app's start-up) checks of the cluster itself before it listens:
the controller answers, and the partitions the settings name exist there. One Slurm
call (`sinfo`); a broken cluster or setting is refused by name, never left to make every
job wait in QUEUED for ever. A cluster that goes away later is a job's waiting_reason
(the backend's transient errors), not this."""
from __future__ import annotations

from service.backends.slurm.cli import SlurmCli
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
