"""What a trainjobs job becomes on Slurm: one heterogeneous job, one component per role.

Why heterogeneous (docs/slurm.md): each role keeps its own resources (CPUs, memory,
GPUs, even partition), as each worker pool has its own machine on Vertex. A single
allocation would give every task the same shape.

Nothing a template sets reaches sbatch's command line, its environment or the batch
script: the script is fixed text (quoted paths only), sbatch runs with a fixed
environment (SlurmConfig.client_env), and the template's command, args and env travel
in job.json, which the launcher reads on the node. The only template-chosen words on
the command line are a partition, account or QoS from labels, checked against
config.NAME (and the allowed partitions) and passed as single argv items."""
from __future__ import annotations

import json
import math
import re
import secrets
import shlex
import uuid
from dataclasses import dataclass

from service.backends.slurm.config import NAME, SlurmConfig
from service.backends.slurm.placement import LABELS, arbitrated, conflict, mapped, placement
from service.core.errors import Problem
from service.jobspec import CompiledJob, Replica
from service.jobspec.spec import DEFAULT_TRAINER_COMMAND

JOB_NAME_PREFIX = "trainjobs-"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
_VCPUS = re.compile(r"-(\d+)(g)?$")


def job_name(job_id: uuid.UUID | str) -> str:
    """The Slurm job's name: how a restarted controller finds what an attempt submitted."""
    return f"{JOB_NAME_PREFIX}{job_id}"


def job_id_of(name: str) -> str | None:
    return name[len(JOB_NAME_PREFIX):] if name.startswith(JOB_NAME_PREFIX) else None


@dataclass(frozen=True)
class Group:
    role: str
    replicas: tuple[Replica, ...]


def groups_of(compiled: CompiledJob) -> list[Group]:
    """One component per role (pool), in pool order; the chief's first (it runs the batch script)."""
    by_pool: dict[int, list[Replica]] = {}
    for r in compiled.replicas:
        by_pool.setdefault(r.pool, []).append(r)
    return [Group(rs[0].tf_role or "reduction_server", tuple(rs)) for _, rs in sorted(by_pool.items())]


def check(compiled: CompiledJob, cfg: SlurmConfig) -> list[Problem]:
    """Refusals at submit that need no team: Reduction Server, each label's Slurm name and
    ALLOWED_* list, and a `slurm-qos` label against the class's QoS (placement.py; the account
    against the team's: check_for_team)."""
    problems = []
    if any(r.tf_role is None for r in compiled.replicas):
        problems.append(Problem("reduction_server", "Reduction Server pools cannot run on Slurm (Google's reducer "
                                "image needs Vertex AI)", 'remove it with "overrides": {"reduction_server": null}'))
    for key, value in placement(compiled, cfg).items():
        if value is None or mapped(cfg, key):
            continue   # a mapped key's label is judged against the job's team or class (conflict())
        if not NAME.match(value):
            problems.append(Problem(f"labels.{LABELS[key]}", f"{value!r} is not a Slurm {key} name",
                                    "use letters, digits, _ . -"))
        elif cfg.allowed(key) and value not in cfg.allowed(key):
            # Labels are a member's to set (job labels merge over the template's): only the
            # operator's list decides which partition, account or QoS trainjobs may use.
            problems.append(Problem(f"labels.{LABELS[key]}", f"{key} {value!r} is not open to trainjobs here",
                                    f"use one of: {', '.join(cfg.allowed(key))}"))
    qos = conflict(compiled, cfg, "qos", compiled.priority_class)
    return problems + ([qos] if qos is not None else [])


def cpus(replica_pool: dict, cfg: SlurmConfig) -> int:
    if cfg.cpus_per_task:
        return cfg.cpus_per_task
    m = _VCPUS.search((replica_pool.get("machineSpec") or {}).get("machineType", ""))
    return int(m.group(1)) if m and not m.group(2) else 4


def gpus(replica_pool: dict) -> int:
    return int((replica_pool.get("machineSpec") or {}).get("acceleratorCount") or 0)


def time_limit_minutes(compiled: CompiledJob) -> int | None:
    raw = ((compiled.custom_job_dict.get("jobSpec") or {}).get("scheduling") or {}).get("timeout")
    if not raw:
        return None
    # Slurm counts in minutes (its shortest limit is one): a limit below one rounds up.
    return max(1, math.ceil(float(raw.rstrip("s")) / 60))


def command_of(replica: Replica, python: str) -> list[str]:
    command = list(replica.command) or list(DEFAULT_TRAINER_COMMAND)
    if command[0] in ("python", "python3"):
        command[0] = python
    return command + list(replica.args)


def job_file(job_id: uuid.UUID, compiled: CompiledJob, cfg: SlurmConfig, run_path: str, output_dir: str) -> dict:
    """What the launcher needs: every task's argv and env, addresses left as placeholders."""
    placeholder = f"@tj-{secrets.token_hex(8)}:"
    addresses = {r.task_name: f"{placeholder}{r.task_name}@" for r in compiled.replicas}
    base = {"PATH": BASE_PATH, "HOME": f"{run_path}/work/home", "TMPDIR": f"{run_path}/work/tmp",
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
    if "/" in cfg.python:
        base["PATH"] = cfg.python.rsplit("/", 1)[0] + ":" + BASE_PATH
    tasks = {}
    for r in compiled.replicas:
        env = {**base, **compiled.env(r, addresses, output_dir)}
        tasks[r.task_name] = {"role": r.tf_role, "index": r.index, "argv": command_of(r, cfg.python), "env": env}
    return {"job_id": str(job_id), "placeholder": placeholder, "cwd": f"{run_path}/work",
            "rendezvous_timeout": cfg.rendezvous_timeout, "tasks": tasks,
            "groups": [{"role": g.role, "tasks": [r.task_name for r in g.replicas]} for g in groups_of(compiled)]}


def batch_script(compiled: CompiledJob, cfg: SlurmConfig, run_path: str) -> str:
    """One srun step per component, in the background. The job ends when every chief and
    worker step has ended (parameter servers wait forever by design and are stopped with
    the job); the first step to fail ends it at once with that step's status."""
    groups = groups_of(compiled)
    q = shlex.quote
    lines = ["#!/bin/bash", "# Written by trainjobs (service/backends/slurm/script.py): paths only, no template text.",
             f"run={q(run_path)}", f"py={q(cfg.python)}", "trainers=()"]
    for g, group in enumerate(groups):
        # A job of one role is no heterogeneous job: srun refuses --het-group there.
        het = f"--het-group={g} " if len(groups) > 1 else ""
        lines.append(f'srun {het}--kill-on-bad-exit=1 "$py" -I -S "$run/launcher.py" "$run" {g} &')
        if group.role != "ps":
            lines.append('trainers+=("$!")')
    lines += [
        'left=${#trainers[@]}',
        'while [ "$left" -gt 0 ]; do',
        '  wait -n -p done; rc=$?',
        '  if [ -z "$done" ]; then break; fi',
        '  if [ "$rc" -ne 0 ]; then echo "trainjobs: step (pid $done) failed with status $rc" >&2; exit "$rc"; fi',
        '  for t in "${trainers[@]}"; do if [ "$t" = "$done" ]; then left=$((left - 1)); fi; done',
        'done',
        'exit 0', ""]
    return "\n".join(lines)


def sbatch_argv(job_id: uuid.UUID, compiled: CompiledJob, cfg: SlurmConfig, run_path: str,
                identity: tuple[int, int] | None, *, team: str | None = None,
                priority_class: str | None = None) -> list[str]:
    """sbatch's arguments: options for the whole job, then one `:`-separated set per component."""
    where = arbitrated(compiled, cfg, team, priority_class)
    # --requeue (TRAINJOBS_SLURM_REQUEUE): a Slurm preemption puts the job back in the queue under
    # the same id; the backend follows it (docs/slurm.md "Sharing the cluster").
    common = [f"--job-name={job_name(job_id)}", f"--comment=trainjobs job {job_id}", "--parsable",
              f"--chdir={run_path}/work", f"--output={run_path}/slurm.out", "--open-mode=append",
              "--kill-on-invalid-dep=yes", "--requeue" if cfg.requeue else "--no-requeue"]
    if identity is not None:
        common += [f"--uid={identity[0]}", f"--gid={identity[1]}"]
    minutes = time_limit_minutes(compiled)
    pools = (compiled.custom_job_dict.get("jobSpec") or {}).get("workerPoolSpecs") or []
    argv: list[str] = []
    for g, group in enumerate(groups_of(compiled)):
        pool = pools[group.replicas[0].pool] if group.replicas[0].pool < len(pools) else {}
        comp = [f"--ntasks={len(group.replicas)}", f"--cpus-per-task={cpus(pool, cfg)}"]
        if gpus(pool):
            comp.append(f"--gpus-per-task={gpus(pool)}")
        if minutes is not None:
            comp.append(f"--time={minutes}")
        if cfg.mem_per_cpu_mb:
            comp.append(f"--mem-per-cpu={cfg.mem_per_cpu_mb}")
        for key in ("partition", "account", "qos"):
            if where[key]:
                comp.append(f"--{key}={where[key]}")
        if g:
            argv.append(":")
        argv += (common if g == 0 else []) + comp
    return argv + [f"{run_path}/batch.sh"]


def dumps(obj) -> str:
    return json.dumps(obj, indent=1)
