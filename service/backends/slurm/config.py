"""The slurm backend's slice of the settings, checked once at start-up.

The backend receives only this, never the whole Settings: what it needs to find the
cluster, where run folders live, who jobs run as, and its limits. entry.py
(slurm_config_of) maps the TRAINJOBS_SLURM_* settings to it, so this package does not import
service.core.config. (The slurm backend's counterpart of local/settings.py; named SlurmConfig
since before the other slices, and kept so.)"""
from __future__ import annotations

import os
import pwd
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")   # partitions, accounts, QoS names
TOOLS = ("sbatch", "squeue", "scancel")


class SlurmConfigError(RuntimeError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        # One line: `serve` prints it as its whole refusal (service/cli/startup.py).
        super().__init__("slurm backend is misconfigured: " + "; ".join(problems))


@dataclass(frozen=True)
class SlurmConfig:
    conf: Path | None
    bin_path: str                 # PATH the Slurm clients are looked up in
    work_dir: Path | None         # checked at start-up: required
    python: str
    job_user: str | None          # None: the service's own user
    team_users: dict[str, str]    # team name -> the user its jobs run as (a root service); others: job_user
    partition: str | None
    account: str | None
    qos: str | None
    allowed_partitions: tuple[str, ...]
    allowed_accounts: tuple[str, ...]
    allowed_qos: tuple[str, ...]
    cpus_per_task: int | None
    mem_per_cpu_mb: int | None
    max_running: int | None
    command_timeout: float
    poll_interval: float
    rendezvous_timeout: float
    # Slurm arbitrates its own cluster (docs/slurm.md "Sharing the cluster"): a team's account,
    # a priority class's QoS; defaults keep callers that build the slice by hand working.
    team_accounts: dict[str, str] = field(default_factory=dict)
    priority_qos: dict[str, str] = field(default_factory=dict)
    requeue: bool = False
    shared_output_dir: Path | None = None   # TRAINJOBS_SLURM_SHARED_OUTPUT_DIR: job outputs there

    def allowed(self, key: str) -> tuple[str, ...]:
        """The names a job's labels may give `key` (partition, account, qos); empty: any."""
        return {"partition": self.allowed_partitions, "account": self.allowed_accounts, "qos": self.allowed_qos}[key]

    @property
    def client_env(self) -> dict[str, str]:
        """The whole environment of every sbatch, squeue and scancel: fixed, nothing of the
        service's own and nothing a template sets (that goes only into the tasks, by file)."""
        env = {"PATH": self.bin_path, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        if self.conf:
            env["SLURM_CONF"] = str(self.conf)
        return env

    def job_identity(self, team: str | None = None) -> tuple[int, int] | None:
        """(uid, gid) a team's jobs run as when the service is root (its user in team_users,
        else job_user); None: the service's own."""
        if os.geteuid() != 0:
            return None
        entry = _user(self.team_users.get(team or "", self.job_user))
        return (entry.pw_uid, entry.pw_gid) if entry else None

    def job_uids(self) -> frozenset[int]:
        """Every uid trainjobs submits as: only their jobs are looked up, adopted or followed."""
        if os.geteuid() != 0:
            return frozenset({os.geteuid()})
        users = [_user(u) for u in (self.job_user, *self.team_users.values())]
        return frozenset(u.pw_uid for u in users if u is not None)


def _user(name: str | None) -> pwd.struct_passwd | None:
    if not name:
        return None
    try:
        return pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        return None


def check(cfg: SlurmConfig) -> None:
    """Every problem at once, each naming the setting to fix."""
    problems: list[str] = []
    for tool in TOOLS:
        if shutil.which(tool, path=cfg.bin_path) is None:
            problems.append(f"{tool} not found in {cfg.bin_path}: install the Slurm clients (Debian: slurm-client) "
                            "or set TRAINJOBS_SLURM_BIN_DIR")
    if cfg.conf is not None and not Path(cfg.conf).is_file():
        problems.append(f"TRAINJOBS_SLURM_CONF={cfg.conf} is not a file")
    if cfg.work_dir is None:
        problems.append("TRAINJOBS_SLURM_WORK_DIR is not set: name a folder the service host and every node "
                        "see at the same path")
    elif not cfg.work_dir.is_absolute():
        problems.append(f"TRAINJOBS_SLURM_WORK_DIR={cfg.work_dir} must be an absolute path")
    if os.geteuid() == 0:
        entry = _user(cfg.job_user)
        if not cfg.job_user:
            problems.append("the service runs as root, so TRAINJOBS_SLURM_JOB_USER must name the unprivileged "
                            "user jobs run as (template code never runs as root)")
        elif entry is None:
            problems.append(f"TRAINJOBS_SLURM_JOB_USER={cfg.job_user!r} is no user on this host")
        elif entry.pw_uid == 0 or entry.pw_gid == 0:
            problems.append(f"TRAINJOBS_SLURM_JOB_USER={cfg.job_user!r} is root (uid or gid 0); name an "
                            "unprivileged user")
        problems += _team_user_problems(cfg, entry)
    for what, value in (("PARTITION", cfg.partition), ("ACCOUNT", cfg.account), ("QOS", cfg.qos),
                        *(("ALLOWED_PARTITIONS", p) for p in cfg.allowed_partitions),
                        *(("ALLOWED_ACCOUNTS", p) for p in cfg.allowed_accounts),
                        *(("ALLOWED_QOS", p) for p in cfg.allowed_qos)):
        if value is not None and not NAME.match(value):
            problems.append(f"TRAINJOBS_SLURM_{what}={value!r} is not a Slurm name (letters, digits, _ . -)")
    for what, mapping in (("TEAM_ACCOUNTS", cfg.team_accounts), ("PRIORITY_QOS", cfg.priority_qos)):
        for key, value in sorted(mapping.items()):
            if not isinstance(value, str) or not NAME.match(value):
                problems.append(f"TRAINJOBS_SLURM_{what}[{key!r}]={value!r} is not a Slurm name (letters, digits, "
                                "_ . -, at most 64, starting with a letter or digit)")
    problems += _defaults_allowed(cfg)
    if problems:
        raise SlurmConfigError(problems)


def _team_user_problems(cfg: SlurmConfig, shared: pwd.struct_passwd | None) -> list[str]:
    """Each mapped team's user: unprivileged, and alone in its uid and primary group (the
    run folders' group): two teams sharing either could enter each other's run folders."""
    problems: list[str] = []
    seen: dict[int, str] = {}
    groups: dict[int, str] = {}
    if shared is not None:
        seen[shared.pw_uid] = groups[shared.pw_gid] = "TRAINJOBS_SLURM_JOB_USER"
    for team, user in sorted(cfg.team_users.items()):
        where = f"TRAINJOBS_SLURM_TEAM_USERS[{team!r}]={user!r}"
        entry = _user(user)
        if entry is None:
            problems.append(f"{where} is no user on this host")
        elif entry.pw_uid == 0 or entry.pw_gid == 0:
            problems.append(f"{where} is root (uid or gid 0); name an unprivileged user")
        elif entry.pw_uid in seen or entry.pw_gid in groups:
            other = seen.get(entry.pw_uid) or groups[entry.pw_gid]
            problems.append(f"{where} shares its uid or primary group with {other}: give each team a user "
                            "with a primary group of its own")
        else:
            seen[entry.pw_uid] = groups[entry.pw_gid] = where
    return problems


def _defaults_allowed(cfg: SlurmConfig) -> list[str]:
    """A default outside its ALLOWED_* list is the operator's mistake, refused at start:
    left to submit, it would be a 422 blaming a label the member never set."""
    out = []
    for what, key, value in (("PARTITION", "partition", cfg.partition), ("ACCOUNT", "account", cfg.account),
                             ("QOS", "qos", cfg.qos)):
        allowed = cfg.allowed(key)
        if value is not None and allowed and value not in allowed:
            out.append(f"TRAINJOBS_SLURM_{what}={value!r} is not in TRAINJOBS_SLURM_ALLOWED_"
                       f"{'QOS' if key == 'qos' else what + 'S'}={list(allowed)}: add it there, or choose "
                       "one of them")
    return out
