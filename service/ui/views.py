"""What the job pages show, shaped from the stored rows: the cluster table, the
TensorBoard log folder, the latest metrics. No web framework here.

The rows come from the domains' services (jobs.service, templates.service); the UI names
only what it reads of them (JobFacts, VersionFacts), not how they are stored."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from service.jobspec import CompiledJob
from service.lifecycle.protocol import LaunchView


class JobFacts(Protocol):
    """What these views read of a job (jobs.service.get_job's)."""

    @property
    def state(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def backend_ref(self) -> str | None: ...
    @property
    def error(self) -> dict | None: ...


class VersionFacts(Protocol):
    """What the template pages read of a template version (templates.service.get_version's)."""

    @property
    def version(self) -> int: ...
    @property
    def description(self) -> str: ...
    @property
    def spec(self) -> dict: ...
    @property
    def parameters(self) -> list: ...

ROLE_NAMES = {"chief": "chief", "worker": "worker", "ps": "parameter server", "evaluator": "evaluator",
              None: "reduction server"}


@dataclass(frozen=True)
class ReplicaRow:
    pool: int
    task_name: str
    role: str
    machine: str
    accelerators: str
    status: str


@dataclass(frozen=True)
class PoolRow:
    pool: int
    role: str
    replicas: int
    machine: str
    accelerators: str
    image: str


def _machine(pool_spec: dict) -> tuple[str, str]:
    spec = pool_spec.get("machineSpec") or {}
    accel = spec.get("acceleratorType")
    count = spec.get("acceleratorCount")
    return spec.get("machineType", "—"), (f"{count} × {accel}" if accel else "none")


def pools(compiled: CompiledJob) -> list[PoolRow]:
    specs = (compiled.custom_job_dict.get("jobSpec") or {}).get("workerPoolSpecs") or []
    out = []
    for i, spec in enumerate(specs):
        members = [r for r in compiled.replicas if r.pool == i]
        if not members:
            continue
        machine, accel = _machine(spec)
        out.append(PoolRow(i, ROLE_NAMES.get(members[0].tf_role, "?"), len(members), machine, accel,
                           members[0].image_uri))
    return out


def replica_status(job: JobFacts, task_name: str) -> str:
    """What is known of one replica from the job's row: the failing one is named in its error."""
    error = job.error or {}
    if error.get("replica") == task_name:
        code = error.get("exit_code")
        return f"failed (exit code {code})" if code is not None else "failed"
    return {"QUEUED": "waiting", "PENDING": "starting", "RUNNING": "running", "SUCCEEDED": "finished",
            "CANCELLING": "stopping", "CANCELLED": "stopped", "FAILED": "stopped", "EXPIRED": "stopped",
            }.get(job.state, job.state.lower())


def replicas(job: JobFacts, compiled: CompiledJob) -> list[ReplicaRow]:
    specs = (compiled.custom_job_dict.get("jobSpec") or {}).get("workerPoolSpecs") or []
    out = []
    for r in compiled.replicas:
        machine, accel = _machine(specs[r.pool]) if r.pool < len(specs) else ("—", "none")
        out.append(ReplicaRow(r.pool, r.task_name, ROLE_NAMES.get(r.tf_role, "?"), machine, accel,
                              replica_status(job, r.task_name)))
    return out


@dataclass(frozen=True)
class LogDir:
    path: str
    url: str | None      # the Cloud console's browser for gs:// folders


def tensorboard_dir(view: LaunchView) -> LogDir | None:
    """Where the job's backend has the trainer write its TensorBoard logs (its launch view)."""
    return LogDir(view.tensorboard_dir, view.tensorboard_url) if view.tensorboard_dir else None


def progress_summary(progress: dict | None) -> dict:
    p = progress if isinstance(progress, dict) else {}
    raw_metrics, raw_evaluation = p.get("metrics"), p.get("evaluation")
    metrics = raw_metrics if isinstance(raw_metrics, dict) else {}
    evaluation = raw_evaluation if isinstance(raw_evaluation, dict) else None
    return {"epoch": _int(p.get("epoch")), "epochs": _int(p.get("epochs")), "phase": p.get("phase"),
            "metrics": {k: v for k, v in sorted(metrics.items())[:64] if isinstance(v, (int, float)) or v is None},
            "examples_per_sec": p.get("examples_per_sec") if isinstance(p.get("examples_per_sec"), (int, float))
            else None,
            "evaluation": evaluation, "model_dir": p.get("model_dir") if isinstance(p.get("model_dir"), str) else None}


@dataclass(frozen=True)
class AttemptChain:
    """Where one attempt stands among its job's attempts (retries and preemptions): "attempt 2 of 2"."""
    number: int
    total: int
    previous: Any = None      # the attempt before it (its id), if any
    next: Any = None          # the attempt that went on after it, if any


def attempt_chain(job: Any, attempts: list) -> AttemptChain:
    by_number = {a.attempt: a.id for a in attempts}
    return AttemptChain(job.attempt, max([job.attempt, *by_number]), by_number.get(job.attempt - 1),
                        by_number.get(job.attempt + 1))


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


PREFER_WORDS = {"listed": "the listed order", "cheapest": "cheapest: the lowest price per hour",
                "soonest": "soonest: the earliest estimated start"}


@dataclass(frozen=True)
class Wish:
    """A job's placement wish as resolved at submit (jobs.wish, docs/queue.md "Cheapest or soonest")."""
    prefer: str                       # in words (PREFER_WORDS)
    start_by: datetime | None
    prices: list[tuple[str, str]]     # (backend, "0.40/h" or "no price"), in the job's order


def wish(raw: Any) -> Wish | None:
    """The job's wish for its page; None: a job of one backend, or of the listed order with no deadline."""
    if not isinstance(raw, dict):
        return None
    at = raw.get("start_by")
    prices = raw.get("prices")
    prices = prices if isinstance(prices, dict) else {}
    return Wish(PREFER_WORDS.get(str(raw.get("prefer")), PREFER_WORDS["listed"]),
                datetime.fromtimestamp(at, UTC) if isinstance(at, int | float) else None,
                [(str(b), f"{p:.2f}/h" if isinstance(p, int | float) else "no price") for b, p in prices.items()])
