"""Which machine types take which accelerators, in what counts.

From Vertex AI's "Configure compute" page (see shared/VERTEX.md). Checked before
launch because Vertex rejects a bad pairing only after the job is queued."""
from __future__ import annotations

import re

from service.core.errors import Problem

N1_SHARED = ("NVIDIA_TESLA_T4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_P4")
_N1 = re.compile(r"^n1-(standard|highmem|highcpu)-(\d+)$")

# Machine families that always come with one accelerator type in fixed counts.
FIXED: dict[str, tuple[str, int]] = {
    **{f"a2-highgpu-{n}g": ("NVIDIA_TESLA_A100", n) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": ("NVIDIA_TESLA_A100", 16),
    **{f"a2-ultragpu-{n}g": ("NVIDIA_A100_80GB", n) for n in (1, 2, 4, 8)},
    **{f"a3-highgpu-{n}g": ("NVIDIA_H100_80GB", n) for n in (1, 2, 4, 8)},
    "a3-megagpu-8g": ("NVIDIA_H100_MEGA_80GB", 8),
    "a3-ultragpu-8g": ("NVIDIA_H200_141GB", 8),
    **{f"g2-standard-{n}": ("NVIDIA_L4", 1) for n in (4, 8, 12, 16, 32)},
    "g2-standard-24": ("NVIDIA_L4", 2),
    "g2-standard-48": ("NVIDIA_L4", 4),
    "g2-standard-96": ("NVIDIA_L4", 8),
}

# CPU-only families Vertex training accepts (no accelerators attach to these).
_CPU_ONLY = re.compile(r"^(e2|n2|n2d|c2|c2d|m1)-[a-z]+-\d+$")
_N1_SIZES = {1, 2, 4, 8, 16, 32, 64, 96}

ACCELERATORS = sorted({*N1_SHARED, "NVIDIA_TESLA_V100", *(a for a, _ in FIXED.values())})


def n1_counts(accelerator: str, vcpus: int) -> tuple[int, ...]:
    if accelerator in N1_SHARED:
        if vcpus >= 64:
            return (4,)
        if vcpus == 32:
            return (2, 4)
        return (1, 2, 4)
    if accelerator == "NVIDIA_TESLA_V100":
        if vcpus >= 64:
            return (8,)
        if vcpus == 32:
            return (4, 8)
        if vcpus == 16:
            return (2, 4, 8)
        return (1, 2, 4, 8)
    return ()


def check_machine(where: str, machine_type: str, accelerator: str | None, count: int) -> list[Problem]:
    accel = accelerator or None
    if accel and accel not in ACCELERATORS:
        return [Problem(f"{where}.accelerator_type", f"unknown accelerator type {accel!r}",
                        f"use one of {', '.join(ACCELERATORS)}")]
    if accel and count == 0:
        return [Problem(f"{where}.accelerator_count", f"accelerator_type {accel} needs a count",
                        "set accelerator_count (e.g. 1)")]
    if count and not accel:
        return [Problem(f"{where}.accelerator_type", f"accelerator_count {count} without a type",
                        "set accelerator_type or make accelerator_count 0")]

    if machine_type in FIXED:
        want, n = FIXED[machine_type]
        if (accel, count) != (want, n):
            return [Problem(f"{where}.accelerator_type",
                            f"{machine_type} comes with exactly {n} x {want}, not "
                            f"{count} x {accel or 'none'}",
                            f"set accelerator_type {want} and accelerator_count {n}")]
        return []

    m = _N1.match(machine_type)
    if m:
        vcpus = int(m.group(2))
        if vcpus not in _N1_SIZES:
            return [Problem(f"{where}.machine_type", f"unknown machine type {machine_type!r}",
                            f"n1 sizes are {sorted(_N1_SIZES)}")]
        if not accel:
            return []
        allowed = n1_counts(accel, vcpus)
        if not allowed:
            return [Problem(f"{where}.accelerator_type", f"{accel} does not attach to {machine_type}",
                            f"on n1 use one of {', '.join(N1_SHARED)} or NVIDIA_TESLA_V100; "
                            f"{accel} needs its own machine family")]
        if count not in allowed:
            return [Problem(f"{where}.accelerator_count",
                            f"{machine_type} takes {accel} in counts {list(allowed)}, not {count}",
                            f"use accelerator_count {' or '.join(map(str, allowed))}")]
        return []

    if _CPU_ONLY.match(machine_type):
        if accel:
            return [Problem(f"{where}.accelerator_type", f"{machine_type} takes no accelerators",
                            "use an n1, a2, a3 or g2 machine type for GPUs, or remove the accelerator")]
        return []

    return [Problem(f"{where}.machine_type", f"unknown machine type {machine_type!r}",
                    "use a Vertex AI training machine type such as n1-standard-8, "
                    "e2-standard-4, a2-highgpu-1g or g2-standard-8")]


_TRAILING_CPUS = re.compile(r"-(\d+)$")
# Machine families sized in accelerators (a2-highgpu-4g): vCPUs per accelerator.
_VCPUS_PER_GPU = {"a2-highgpu": 12, "a2-megagpu": 6, "a2-ultragpu": 12, "a3-highgpu": 26, "a3-megagpu": 26,
                  "a3-ultragpu": 28}


def vcpus(machine_type: str) -> int:
    """A machine type's vCPUs as Vertex AI sizes it (n1-standard-8: 8; a2-highgpu-4g: 48); 0 unknown."""
    fixed = FIXED.get(machine_type)
    family = machine_type.rsplit("-", 1)[0]
    if fixed is not None and family in _VCPUS_PER_GPU:
        return _VCPUS_PER_GPU[family] * fixed[1]
    m = _TRAILING_CPUS.search(machine_type)
    return int(m.group(1)) if m else 0


def pool_demand(custom_job: dict) -> dict[str, int]:
    """What a CustomJob holds while it runs, over every replica of every pool (the Reduction
    Server's too: billed machines): {"vcpu": n, "gpu:<TYPE>": n}. The shared-capacity scheduler's
    demand on Vertex AI (service/capacity, docs/queue.md)."""
    out: dict[str, int] = {}
    for pool in (custom_job.get("jobSpec") or {}).get("workerPoolSpecs") or []:
        if not pool:
            continue
        replicas = int(pool.get("replicaCount") or 0)
        spec = pool.get("machineSpec") or {}
        out["vcpu"] = out.get("vcpu", 0) + vcpus(spec.get("machineType", "")) * replicas
        accelerator, count = spec.get("acceleratorType"), int(spec.get("acceleratorCount") or 0)
        if accelerator and count:
            key = f"gpu:{accelerator}"
            out[key] = out.get(key, 0) + count * replicas
    return {r: n for r, n in out.items() if n}
