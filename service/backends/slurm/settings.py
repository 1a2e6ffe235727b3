"""The slurm backend's TRAINJOBS_SLURM_* variables (docs/slurm.md); read as part of the one Settings
(service/slices.py). Its entry (entry.py) cuts them into `SlurmConfig` (config.py). Pydantic only:
importing it loads none of the backend's code."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field

from service.core.section import Section


class SlurmEnv(Section):
    """The Slurm backend (docs/slurm.md): the service drives a team's own cluster with sbatch, squeue
    and scancel; the run folders are on storage the service host and every node share."""

    slurm_conf: Path | None = Field(None, description="The cluster's slurm.conf (SLURM_CONF for sbatch, squeue "
                                    "and scancel). Default: the clients' own default (/etc/slurm/slurm.conf)")
    slurm_bin_dir: Path | None = Field(None, description="Folder holding sbatch, squeue and scancel. Default: "
                                       "/usr/local/bin, /usr/bin, /bin")
    slurm_work_dir: Path | None = Field(None, description="Run folders of Slurm jobs (logs, outputs): a folder the "
                                        "service host and every node see at the same path (NFS, Lustre...). "
                                        "Required when the slurm backend is enabled")
    slurm_shared_output_dir: Path | None = Field(
        None, description="A folder the service host and every node see at the same path, shared with other "
                          "backends (the same value as TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR): every Slurm job's output "
                          "goes to <folder>/<first attempt's id>, so a preempted job that accepts both may go on on "
                          "either (docs/queue.md, \"Where a preempted job goes on\"). Default: none, outputs stay in "
                          "the run folders and such a job stays on Slurm")
    slurm_python: str = Field("python3", min_length=1, max_length=1024,
                              description="Python on the nodes that runs the launcher and `python ...` commands")
    slurm_job_user: str | None = Field(None, max_length=64, description="The user (name or uid) jobs run as when "
                                       "the service is root; never root. Without root: the service's own user")
    slurm_team_users: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="Team name -> the Slurm user (name or uid) that team's jobs run as when the service is root, "
                    "each with a primary group of its own: one team's tasks then cannot enter, write or read "
                    "another's run folders. A team not named runs as slurm_job_user (shared by every such team)")
    slurm_partition: str | None = Field(None, max_length=64, description="Default partition (a template may name "
                                        "one with the label slurm-partition)")
    slurm_account: str | None = Field(None, max_length=64, description="Default account (label slurm-account)")
    slurm_qos: str | None = Field(None, max_length=64, description="Default QoS (label slurm-qos)")
    slurm_allowed_partitions: list[str] = Field(default_factory=list, description="Partitions a job's labels may "
                                                "name; empty: any (Slurm's own limits still apply)")
    slurm_allowed_accounts: list[str] = Field(default_factory=list, description="Accounts a job's labels may name; "
                                              "empty: any the job user may use")
    slurm_allowed_qos: list[str] = Field(default_factory=list, description="QoS a job's labels may name; empty: any")
    slurm_team_accounts: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="Team name -> the Slurm account its jobs are charged to (sbatch --account), so Slurm's fair "
                    "share arbitrates the cluster between teams. A team not named: the label slurm-account, "
                    "else slurm_account, else the user's DefaultAccount. Checked at start (Slurm names)")
    slurm_priority_qos: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="Priority class name -> the Slurm QoS its jobs get (sbatch --qos), so Slurm's QoS priority "
                    "and preemption decide on the cluster. A class not named: the label slurm-qos, else "
                    "slurm_qos. Checked at start (Slurm names)")
    slurm_requeue: bool = Field(False, description="Submit jobs requeueable (sbatch --requeue): a job Slurm preempts "
                                "with PreemptMode=REQUEUE (or a node failure) goes back to PENDING under the same "
                                "job id and restarts from its checkpoints, followed by trainjobs. Off: --no-requeue "
                                "(Slurm ends such a job PREEMPTED or NODE_FAIL; trainjobs starts a new attempt)")
    slurm_cpus_per_task: int | None = Field(None, ge=1, le=1024, description="CPUs for every task. Default: the "
                                            "vCPUs of the role's machine_type (n1-standard-4: 4)")
    slurm_mem_per_cpu_mb: int | None = Field(None, ge=1, le=10_000_000,
                                             description="--mem-per-cpu for every task; default: the cluster's")
    slurm_max_running_jobs: int | None = Field(None, ge=0, description="Slurm jobs launched at once by this "
                                               "service; the rest wait in QUEUED. Default: no cap of ours")
    slurm_command_timeout_seconds: float = Field(30.0, gt=0, le=600, description="One sbatch, squeue or scancel "
                                                 "call; longer is a transient failure (the next pass tries again)")
    slurm_poll_interval_seconds: float = Field(2.0, ge=0, le=600, description="How often the controller lists the "
                                               "cluster's jobs (one squeue call for all of them)")
    slurm_rendezvous_timeout_seconds: float = Field(
        300.0, gt=0, le=86_400, description="How long a task waits on its node for every other task of its job "
                                            "to publish its address before it gives up (exit 3)")
