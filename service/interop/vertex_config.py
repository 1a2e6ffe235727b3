"""The YAML `gcloud ai custom-jobs create --config` takes (a CustomJobSpec, camelCase,
as `GET .../export?format=config` writes it) -> pools and the spec's other fields.

The same rules as the AI Platform config: fields a template holds are mapped, fields
that change what runs and that a template cannot hold, and unknown fields, are
problems. One field is undone rather than kept: TRAINJOBS_EXPECTED_GPUS, which the
compiler itself adds to GPU pools (a template may not set TRAINJOBS_* names)."""
from __future__ import annotations

import difflib
from typing import Any

from service.core.errors import Problem
from service.interop import numbers
from service.interop.pools import Pool
from service.jobspec.cluster import EXPECTED_GPUS_ENV

_SPEC_KEYS = {"workerPoolSpecs", "scheduling", "serviceAccount", "network", "baseOutputDirectory",
              "enableWebAccess"}
_REFUSED = {"tensorboard": "trainjobs does not attach Vertex TensorBoard instances; remove it",
            "experiment": "remove it", "experimentRun": "remove it", "models": "remove it",
            "reservedIpRanges": "remove it", "persistentResourceId": "trainjobs launches on demand; remove it",
            "protectedArtifactLocationId": "remove it", "pscInterfaceConfig": "remove it",
            "enableDashboardAccess": "remove it"}
_POOL_KEYS = {"machineSpec", "replicaCount", "diskSpec", "containerSpec"}
_SCHEDULING = {"timeout": "timeout_seconds", "restartJobOnWorkerRestart": "restart_job_on_worker_restart",
               "strategy": "strategy", "disableRetries": "disable_retries",
               "maxWaitDuration": "max_wait_duration_seconds"}


def convert(doc: Any, warnings: list[Problem]) -> tuple[list[Pool | None], dict, list[Problem]]:
    problems: list[Problem] = []
    if not isinstance(doc, dict):
        return [], {}, [Problem("source", "a Vertex config is a YAML mapping (workerPoolSpecs: ...)",
                                "paste the file given to gcloud ai custom-jobs create --config")]
    for key in sorted(set(doc) - _SPEC_KEYS):
        if key in _REFUSED:
            problems.append(Problem(key, "cannot be honoured by a trainjobs template", _REFUSED[key]))
        else:
            problems.append(_unknown(key, _SPEC_KEYS))
    pools_in = doc.get("workerPoolSpecs")
    if not isinstance(pools_in, list) or not pools_in:
        return [], {}, problems + [Problem("workerPoolSpecs", "missing or not a list", "give one entry a pool")]
    pools = [_pool(f"workerPoolSpecs[{i}]", p, problems, warnings) for i, p in enumerate(pools_in)]
    extra: dict = {}
    for key, name in (("serviceAccount", "service_account"), ("network", "network")):
        if doc.get(key) is not None:
            extra[name] = str(doc[key])
    if doc.get("enableWebAccess") is not None:
        extra["enable_web_access"] = doc["enableWebAccess"]
    base = doc.get("baseOutputDirectory")
    if base is not None:
        if isinstance(base, dict) and set(base) <= {"outputUriPrefix"}:
            extra["base_output_directory"] = base.get("outputUriPrefix")
        else:
            problems.append(Problem("baseOutputDirectory", "takes only outputUriPrefix", ""))
    sched = doc.get("scheduling")
    if sched is not None:
        extra["scheduling"] = _scheduling(sched, problems)
    return pools, extra, problems


def _unknown(path: str, known: set[str]) -> Problem:
    close = difflib.get_close_matches(path.rsplit(".", 1)[-1], sorted(known), n=1)
    return Problem(path, "not a field of Vertex's CustomJobSpec that trainjobs takes",
                   f"did you mean {close[0]}?" if close else "remove it")


def _pool(where: str, p: Any, problems: list[Problem], warnings: list[Problem]) -> Pool | None:
    if p in ({}, None):
        return None
    if not isinstance(p, dict):
        problems.append(Problem(where, "must be a mapping", ""))
        return None
    if "pythonPackageSpec" in p:
        problems.append(Problem(f"{where}.pythonPackageSpec", "Python packages in a prebuilt image: trainjobs "
                                "templates run container images", "build an image with the package and give a "
                                "containerSpec"))
        return None
    problems += [_unknown(f"{where}.{k}", _POOL_KEYS) for k in sorted(set(p) - _POOL_KEYS)]
    machine = p.get("machineSpec") or {}
    container = p.get("containerSpec") or {}
    if not isinstance(machine, dict) or not isinstance(container, dict):
        problems.append(Problem(where, "machineSpec and containerSpec must be mappings", ""))
        return None
    problems += [_unknown(f"{where}.machineSpec.{k}", {"machineType", "acceleratorType", "acceleratorCount"})
                 for k in sorted(set(machine) - {"machineType", "acceleratorType", "acceleratorCount"})]
    problems += [_unknown(f"{where}.containerSpec.{k}", {"imageUri", "command", "args", "env"})
                 for k in sorted(set(container) - {"imageUri", "command", "args", "env"})]
    pool = Pool(where, str(machine.get("machineType") or ""), _int(f"{where}.replicaCount", p.get("replicaCount", 1),
                                                                  problems),
                machine.get("acceleratorType") or None,
                _int(f"{where}.machineSpec.acceleratorCount", machine.get("acceleratorCount", 0), problems),
                str(container.get("imageUri") or ""), [str(c) for c in container.get("command") or []],
                [str(a) for a in container.get("args") or []])
    if not pool.machine_type:
        problems.append(Problem(f"{where}.machineSpec.machineType", "missing", "give the machine type"))
    if not pool.image_uri:
        problems.append(Problem(f"{where}.containerSpec.imageUri", "missing", "give the pool's image"))
    for i, var in enumerate(container.get("env") or []):
        if not isinstance(var, dict) or "name" not in var or set(var) - {"name", "value"}:
            problems.append(Problem(f"{where}.containerSpec.env[{i}]", "each variable is {name, value}", ""))
            continue
        pool.env[str(var["name"])] = str(var.get("value", ""))
    if pool.env.get(EXPECTED_GPUS_ENV) == str(pool.accelerator_count):
        del pool.env[EXPECTED_GPUS_ENV]
        warnings.append(Problem(f"{where}.containerSpec.env", f"{EXPECTED_GPUS_ENV} left out: trainjobs sets it "
                                "itself on every pool with GPUs", ""))
    disk = p.get("diskSpec")
    if isinstance(disk, dict):
        pool.disk = {k: v for k, v in (("boot_disk_type", disk.get("bootDiskType")),
                                       ("boot_disk_size_gb", disk.get("bootDiskSizeGb"))) if v is not None}
        problems += [_unknown(f"{where}.diskSpec.{k}", {"bootDiskType", "bootDiskSizeGb"})
                     for k in sorted(set(disk) - {"bootDiskType", "bootDiskSizeGb"})]
    return pool


def _int(where: str, value: Any, problems: list[Problem]) -> int:
    n = numbers.whole(where, value, problems, example="1")
    return 0 if n is None else n


def _scheduling(s: Any, problems: list[Problem]) -> dict:
    if not isinstance(s, dict):
        problems.append(Problem("scheduling", "must be a mapping", ""))
        return {}
    out: dict = {}
    for key, value in s.items():
        if key not in _SCHEDULING:
            problems.append(_unknown(f"scheduling.{key}", set(_SCHEDULING)))
        elif key in ("timeout", "maxWaitDuration"):
            text = str(value)
            if not (text.endswith("s") and text[:-1].isdigit()):
                problems.append(Problem(f"scheduling.{key}", f"{value!r} is not whole seconds", 'write e.g. "3600s"'))
            else:
                seconds = numbers.whole(f"scheduling.{key}", text[:-1], problems)
                if seconds is not None:
                    out[_SCHEDULING[key]] = seconds
        else:
            out[_SCHEDULING[key]] = value
    return out
