"""Vertex worker pools -> a trainjobs template spec.

Every import (an AI Platform config, gcloud flags) first becomes up to four pools
in Vertex's fixed order: [0] chief, [1] workers, [2] parameter servers or Reduction
Server, [3] evaluator; None is an empty (skipped) pool. One function then writes
the spec, so the pool rules live in one place on this side too."""
from __future__ import annotations

from dataclasses import dataclass, field

from service.core.errors import Problem

MAX_POOLS = 4
# Google's Reduction Server image, in each of its registries (Vertex "Reduction Server").
REDUCTION_SERVER_IMAGES = tuple(f"{region}-docker.pkg.dev/vertex-ai-restricted/training/reductionserver"
                                for region in ("us", "europe", "asia"))
DEFAULT_DISK = {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100}


@dataclass
class Pool:
    where: str                        # where it came from, for messages: trainingInput.workerConfig
    machine_type: str
    replica_count: int = 1
    accelerator_type: str | None = None
    accelerator_count: int = 0
    image_uri: str = ""
    command: list[str] = field(default_factory=list)   # empty: the image's entrypoint
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    disk: dict | None = None          # {boot_disk_type, boot_disk_size_gb}; None: Vertex's default


def is_reduction_server(image: str) -> bool:
    return image.split(":", 1)[0].split("@", 1)[0] in REDUCTION_SERVER_IMAGES


def to_spec(pools: list[Pool | None], warnings: list[Problem]) -> tuple[dict, list[Problem]]:
    """(spec, problems): the template spec these pools describe, or what stops it."""
    problems: list[Problem] = []
    if not pools or pools[0] is None:
        return {}, [Problem("pools[0]", "the first pool is the chief (Vertex's primary replica); it cannot be "
                            "empty", "describe the chief's machine and image in the first pool")]
    if len(pools) > MAX_POOLS:
        extra = pools[MAX_POOLS]
        problems.append(Problem(extra.where if extra is not None else f"pools[{MAX_POOLS}]",
                                f"{len(pools)} pools; Vertex has four (chief, workers, parameter servers or "
                                "Reduction Server, evaluator)", "remove the pools after the fourth"))
    chief = pools[0]
    if not chief.image_uri:
        problems.append(Problem(chief.where, "the chief has no container image",
                                "give the chief's image (masterConfig.imageUri, or container-image-uri)"))
    spec: dict = {"container": {"image_uri": chief.image_uri, "command": list(chief.command),
                                "args": list(chief.args), "env": dict(chief.env)},
                  "chief": _role(chief, chief, problems)}
    if len(pools) > 1 and pools[1] is not None:
        spec["workers"] = _role(pools[1], chief, problems)
    if len(pools) > 2 and pools[2] is not None:
        pool = pools[2]
        if is_reduction_server(pool.image_uri):
            spec["reduction_server"] = _reduction_server(pool, warnings, problems)
        else:
            spec["distribution"] = "parameter_server"
            spec["parameter_servers"] = _role(pool, chief, problems)
    if len(pools) > 3 and pools[3] is not None:
        spec["evaluator"] = _role(pools[3], chief, problems)
    return spec, problems


def _machine(pool: Pool) -> dict:
    out: dict = {"machine_type": pool.machine_type, "replica_count": pool.replica_count}
    if pool.accelerator_type:
        out["accelerator_type"] = pool.accelerator_type
    if pool.accelerator_count:  # without a type too: the template's checks name that problem
        out["accelerator_count"] = pool.accelerator_count
    if pool.disk:
        out["disk"] = {**DEFAULT_DISK, **pool.disk}
    return out


def _role(pool: Pool, chief: Pool, problems: list[Problem]) -> dict:
    role = _machine(pool)
    if pool is chief:
        return role
    # The template's container is the chief's; a role states only what differs (its env is merged).
    over: dict = {}
    if pool.image_uri and pool.image_uri != chief.image_uri:
        over["image_uri"] = pool.image_uri
    if pool.command != chief.command:
        over["command"] = list(pool.command)
    if pool.args != chief.args:
        over["args"] = list(pool.args)
    env = {k: v for k, v in pool.env.items() if chief.env.get(k) != v}
    if env:
        over["env"] = env
    missing = sorted(set(chief.env) - set(pool.env))
    if missing:
        problems.append(Problem(pool.where, f"lacks environment variables the chief sets ({', '.join(missing)}); "
                                "a trainjobs role adds to the chief's environment and cannot remove from it",
                                "give this pool the same variables (any value), or remove them from the chief"))
    if over:
        role["container"] = over
    return role


def _reduction_server(pool: Pool, warnings: list[Problem], problems: list[Problem]) -> dict:
    if pool.accelerator_type or pool.command or pool.args or pool.env:
        problems.append(Problem(pool.where, "a Reduction Server pool runs Google's image as it is, without GPUs, "
                                "command, arguments or environment (gcloud's --args and --command go to every "
                                "pool, this one too)", "remove them from pool 2 (import without --args/--command "
                                "and add the trainer's arguments to the template after)"))
    warnings.append(Problem(pool.where, "pool 2 runs Google's Reduction Server image: it became reduction_server, "
                            "and since the source ran one, its chief and worker images are taken to include "
                            "Google's reduction client (reduction_server.client_installed: true)",
                            "check that they do; without the client the reducers idle, billed"))
    out: dict = {"machine_type": pool.machine_type, "replica_count": pool.replica_count,
                 "image_uri": pool.image_uri, "client_installed": True}
    if pool.disk:
        out["disk"] = {**DEFAULT_DISK, **pool.disk}
    return out
