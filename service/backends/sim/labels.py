"""What a job asks of the sim, read from its labels (the template's `labels`, or a submit's):

- `sim-duration-seconds`: how long it runs, a whole number of seconds (0 up to
  TRAINJOBS_SIM_MAX_DURATION_SECONDS; without it, TRAINJOBS_SIM_DEFAULT_DURATION_SECONDS),
  scaled by TRAINJOBS_SIM_SPEED when it is launched;
- `sim-exit-code`: how its chief ends, 0 to 255 (default 0: SUCCEEDED; else FAILED with that
  exit code, as a real replica's);
- `sim-demand-<resource>`: what it holds while it runs, a whole number per resource (e.g.
  `sim-demand-core: "4"`, `sim-demand-gpu: "2"`). With none, one core per replica and the GPUs its
  pools ask for (accelerator count x replicas), as the local backend counts.

Label values may hold only lowercase letters, digits, `_` and `-` (Google's label rules, checked by
the compiler), hence whole numbers and one label per resource. Any other `sim-` label is refused:
a misspelt one would otherwise be ignored without a word."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.backends.sim.settings import SimSettings
from service.core.errors import Problem
from service.jobspec import CompiledJob

PREFIX = "sim-"
DURATION = "sim-duration-seconds"
EXIT_CODE = "sim-exit-code"
DEMAND = "sim-demand-"
MAX_EXIT_CODE = 255
MAX_DEMAND = 1_000_000_000   # a capacity count's own bound (PUT /v1/capacity)


@dataclass(frozen=True)
class Asked:
    duration_seconds: int
    exit_code: int


def labels_of(compiled: CompiledJob) -> Mapping[str, str]:
    return compiled.custom_job_dict.get("labels") or {}


def _whole(value: str) -> int | None:
    # isdigit() alone takes other scripts' digits (int("٣") == 3), which label values allow.
    return int(value) if value.isascii() and value.isdigit() else None


def problems(compiled: CompiledJob, settings: SimSettings) -> list[Problem]:
    """Every bad sim label at once, each saying how to fix it (the submit answers 422)."""
    out = []
    for key, value in sorted(labels_of(compiled).items()):
        if not key.startswith(PREFIX):
            continue
        n = _whole(value)
        where = f"labels.{key}"
        if key == DURATION:
            if n is None or n > settings.max_duration_seconds:
                out.append(Problem(where, f"{value!r} is not a duration the sim runs",
                                   f"a whole number of seconds from 0 to {settings.max_duration_seconds} "
                                   "(TRAINJOBS_SIM_MAX_DURATION_SECONDS), e.g. \"600\""))
        elif key == EXIT_CODE:
            if n is None or n > MAX_EXIT_CODE:
                out.append(Problem(where, f"{value!r} is not an exit status",
                                   f"a whole number from 0 (SUCCEEDED) to {MAX_EXIT_CODE}, e.g. \"1\""))
        elif key.startswith(DEMAND) and len(key) > len(DEMAND):
            if n is None or n > MAX_DEMAND:
                out.append(Problem(where, f"{value!r} is not a count of {key[len(DEMAND):]}",
                                   f"a whole number from 0 to {MAX_DEMAND}, e.g. \"4\""))
        else:
            out.append(Problem(where, f"the sim backend reads no label {key!r}",
                               f"use {DURATION}, {EXIT_CODE} or {DEMAND}<resource> (docs/sim.md), or a name "
                               f"not starting with {PREFIX!r}"))
    return out


def asked(compiled: CompiledJob, settings: SimSettings) -> Asked:
    """The job's duration (unscaled) and exit status, from labels problems() found nothing wrong with."""
    labels = labels_of(compiled)
    duration = _whole(labels.get(DURATION, ""))
    code = _whole(labels.get(EXIT_CODE, ""))
    return Asked(settings.default_duration_seconds if duration is None else duration, 0 if code is None else code)


def demand(compiled: CompiledJob) -> dict[str, int]:
    """SharesCapacity.demand: the sim-demand-* labels, else a core per replica and the pools' GPUs."""
    named = {k[len(DEMAND):]: n for k, v in labels_of(compiled).items()
             if k.startswith(DEMAND) and len(k) > len(DEMAND) and (n := _whole(v)) is not None}
    if named:
        return named
    pools = (compiled.custom_job_dict.get("jobSpec") or {}).get("workerPoolSpecs") or []
    gpus = sum(int((p.get("machineSpec") or {}).get("acceleratorCount") or 0) * int(p.get("replicaCount") or 0)
               for p in pools if p)
    return {"core": len(compiled.replicas), **({"gpu": gpus} if gpus else {})}
