"""Where a job goes on the cluster: its partition, account and QoS, and who decides each.

A partition comes from the `slurm-partition` label, else TRAINJOBS_SLURM_PARTITION (limited by
TRAINJOBS_SLURM_ALLOWED_PARTITIONS). The account and the QoS are what Slurm's fair share and
QoS priorities and preemption judge a job by, so once the operator maps them
(TRAINJOBS_SLURM_TEAM_ACCOUNTS, TRAINJOBS_SLURM_PRIORITY_QOS) they come from the job's team and
priority class and nothing else: a team not mapped, or a class not mapped, gets the setting's
default (TRAINJOBS_SLURM_ACCOUNT / _QOS, else Slurm's own), never what a label asks, whatever
the ALLOWED_* lists say (labels are a member's to set). A label naming anything else is
refused at submit (a 422 naming the label) and, should one reach a launch, there too: never
silently replaced. Without a mapping a label still picks, within its ALLOWED_* list."""
from __future__ import annotations

from service.backends.slurm.config import SlurmConfig
from service.core.errors import Problem
from service.jobspec import CompiledJob

LABELS = {"partition": "slurm-partition", "account": "slurm-account", "qos": "slurm-qos"}
MAPPINGS = {"account": "TRAINJOBS_SLURM_TEAM_ACCOUNTS", "qos": "TRAINJOBS_SLURM_PRIORITY_QOS"}


class PlacementConflict(ValueError):
    """A label that names another account or QoS than the operator's mapping gives the job."""


def labels_of(compiled: CompiledJob) -> dict[str, str]:
    return compiled.custom_job_dict.get("labels") or {}


def placement(compiled: CompiledJob, cfg: SlurmConfig) -> dict[str, str | None]:
    """partition, account, qos as the labels ask, else the settings (before any mapping)."""
    labels = labels_of(compiled)
    return {key: labels.get(label) or getattr(cfg, key) for key, label in LABELS.items()}


def _mapping(cfg: SlurmConfig, key: str) -> dict[str, str]:
    return {"account": cfg.team_accounts, "qos": cfg.priority_qos}.get(key) or {}


def mapped(cfg: SlurmConfig, key: str) -> bool:
    """Whether the operator's mapping decides `key` for every job (labels no longer do)."""
    return bool(_mapping(cfg, key))


def decided(cfg: SlurmConfig, key: str, owner: str | None) -> str | None:
    """The account of team `owner`, or the QoS of priority class `owner`, under a mapping:
    its entry, else the setting's default (None: Slurm's own default)."""
    return _mapping(cfg, key).get(owner or "") or getattr(cfg, key)


def conflict(compiled: CompiledJob, cfg: SlurmConfig, key: str, owner: str | None) -> Problem | None:
    """The label of `key` ("account": owner is the team; "qos": the priority class) when a
    mapping decides it and the label names something else."""
    asked = labels_of(compiled).get(LABELS[key])
    if not asked or not mapped(cfg, key):
        return None
    value = decided(cfg, key, owner)
    if asked == value:
        return None
    what, by = ("account", "team") if key == "account" else ("QoS", "priority class")
    mapping = _mapping(cfg, key)
    whose = f"{by} {owner!r}" if owner else f"a job without a {by}"
    if value is None:
        gets = f"Slurm's default {what}"
    elif (owner or "") in mapping:
        gets = f"{what} {value!r}"
    else:
        gets = f"{what} {value!r} (TRAINJOBS_SLURM_{key.upper()}, the default of those not in the mapping)"
    fix = "remove the label" + (f" (or set it to {value!r})" if value is not None else "")
    if key == "qos":   # which class runs under the QoS asked: classes are anyone's to read (GET /v1/priority-classes)
        classes = sorted(c for c, q in mapping.items() if q == asked)
        if classes:
            fix += (f"; QoS {asked!r} is that of priority class {', '.join(map(repr, classes))}: submit with "
                    "that class if your team may use it")
    return Problem(f"labels.{LABELS[key]}", f"{what} {asked!r} is not this job's: {MAPPINGS[key]} gives each "
                   f"job the {what} of its {by}, and {whose} gets {gets}; a label cannot choose it", fix)


def arbitrated(compiled: CompiledJob, cfg: SlurmConfig, team: str | None,
               priority_class: str | None) -> dict[str, str | None]:
    """placement(), with the account and QoS the mappings decide (the launch's own check: the
    submit refused the same conflicts already, through check_launchable and check_for_team)."""
    where = placement(compiled, cfg)
    for key, owner in (("account", team), ("qos", priority_class)):
        problem = conflict(compiled, cfg, key, owner)
        if problem is not None:
            raise PlacementConflict(f"{problem.field}: {problem.message}: {problem.fix}")
        if mapped(cfg, key):
            where[key] = decided(cfg, key, owner)
    return where
