"""An AI Platform Training job config (the YAML `gcloud ai-platform jobs submit
training --config` takes: a TrainingInput, with or without a `trainingInput:`
wrapper) -> pools and the spec's other fields.

Every key is accounted for. Keys that describe what runs become template fields.
Keys that say only where or how the job was sent, or that a container job ignores
(region, runtimeVersion...), are warnings with their path. Keys that would change
what runs and that a trainjobs template cannot express (Python packages, TPUs,
hyperparameter tuning, encryption...) and keys AI Platform does not know (a typo
would otherwise lose a whole pool) are problems: the import answers 422."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from service.core.errors import Problem
from service.core.text import plural
from service.interop import numbers
from service.interop.legacy_machines import (
    RETIRED_ACCELERATORS,
    SCALE_TIERS,
    TPU_ACCELERATORS,
    TPU_TIERS,
    legacy_machine,
)
from service.interop.pools import Pool

WRAPPER_KEYS = {"trainingInput", "jobId", "labels", "etag", "createTime", "startTime", "endTime", "state",
                "errorMessage", "trainingOutput", "predictionInput", "predictionOutput", "jobPosition"}
_ROLES = (("master", "masterType", None, "masterConfig"),
          ("worker", "workerType", "workerCount", "workerConfig"),
          ("parameterServer", "parameterServerType", "parameterServerCount", "parameterServerConfig"),
          ("evaluator", "evaluatorType", "evaluatorCount", "evaluatorConfig"))
_ROLE_KEYS = {k for r in _ROLES for k in r[1:] if k}
_HANDLED = _ROLE_KEYS | {"scaleTier", "args", "jobDir", "scheduling", "useChiefInTfConfig", "serviceAccount",
                         "network", "enableWebAccess"}
_WARNED = {
    "region": "not kept: a template has no region; the service's TRAINJOBS_VERTEX_LOCATION decides",
    "runtimeVersion": "not kept: AI Platform ignores it for custom containers, and trainjobs runs containers",
    "pythonVersion": "not kept: AI Platform ignores it for custom containers, and trainjobs runs containers",
}
_REFUSED = {
    "packageUris": "build an image with the package and give it as masterConfig.imageUri",
    "pythonModule": "build an image whose command runs the module and give it as masterConfig.imageUri",
    "hyperparameters": "import the job without it; hyperparameter tuning is not part of a template",
    "encryptionConfig": "trainjobs does not set customer-managed encryption keys; remove it",
}
_REPLICA_KEYS = {"acceleratorConfig", "imageUri", "containerCommand", "containerArgs", "diskConfig",
                 "tpuTfVersion"}
_SCHEDULING_KEYS = {"maxRunningTime", "maxWaitTime", "priority"}
_DURATION = re.compile(r"^(\d+)(?:\.(\d{1,9}))?s$")


@dataclass
class Converted:
    pools: list[Pool | None] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def convert(doc: Any, warnings: list[Problem]) -> tuple[Converted, list[Problem]]:
    problems: list[Problem] = []
    if not isinstance(doc, dict):
        return Converted(), [Problem("source", "an AI Platform config is a YAML mapping (trainingInput: ...)",
                                     "paste the config.yaml given to gcloud ai-platform jobs submit training")]
    prefix, ti, extra = "", doc, {}
    if "trainingInput" in doc:
        prefix, ti = "trainingInput.", doc["trainingInput"]
        for key in sorted(set(doc) - {"trainingInput"}):
            if key == "labels" and isinstance(doc["labels"], dict):
                extra["labels"] = {str(k): str(v) for k, v in doc["labels"].items()}
            elif key in WRAPPER_KEYS:
                warnings.append(Problem(key, "not kept: part of the AI Platform Job, not of what it runs", ""))
            else:
                problems.append(_unknown(key, WRAPPER_KEYS | {"trainingInput"}, "AI Platform's Job"))
        if not isinstance(ti, dict):
            return Converted(), problems + [Problem("trainingInput", "must be a mapping", "")]
    out = Converted(extra=extra)
    for key in sorted(set(ti) - _HANDLED):
        if key in _WARNED:
            warnings.append(Problem(prefix + key, _WARNED[key], ""))
        elif key in _REFUSED:
            problems.append(Problem(prefix + key, "cannot be honoured by a trainjobs template", _REFUSED[key]))
        else:
            problems.append(_unknown(prefix + key, _HANDLED | set(_WARNED) | set(_REFUSED)))

    tier = _tier(ti, prefix, warnings, problems)
    args = _strings(ti, "args", prefix, problems)
    for role, type_key, count_key, config_key in _ROLES:
        out.pools.append(_pool(ti, prefix, role, type_key, count_key, config_key, tier, args, problems, warnings))
    while len(out.pools) > 1 and out.pools[-1] is None:
        out.pools.pop()
    chief = out.pools[0]
    for pool in out.pools[1:]:
        if pool is not None and chief is not None and not pool.image_uri:
            pool.image_uri = chief.image_uri  # AI Platform: a role without imageUri runs the master's image

    if ti.get("jobDir") is not None:
        out.extra["base_output_directory"] = str(ti["jobDir"])
        warnings.append(Problem(prefix + "jobDir", "became base_output_directory: Vertex gives every replica "
                                "AIP_MODEL_DIR=<it>/model/, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR, and no "
                                "longer passes --job-dir", "if the trainer reads --job-dir, read AIP_MODEL_DIR, "
                                "or add --job-dir to the template's args"))
    distributed = sum(p.replica_count for p in out.pools if p is not None) > 1
    if distributed and not ti.get("useChiefInTfConfig"):  # TF_CONFIG is set for distributed jobs only
        warnings.append(Problem(prefix + "useChiefInTfConfig", "AI Platform called the first replica \"master\" in "
                                "TF_CONFIG unless this was true; Vertex and trainjobs always call it \"chief\"",
                                "a trainer that looks for \"master\" must accept \"chief\""))
    _scheduling(ti, prefix, out.extra, warnings, problems)
    for key, name in (("serviceAccount", "service_account"), ("network", "network")):
        if ti.get(key) is not None:
            out.extra[name] = str(ti[key])
    if ti.get("enableWebAccess") is not None:
        out.extra["enable_web_access"] = bool(ti["enableWebAccess"])
    return out, problems


def _unknown(path: str, known: set[str], where: str = "AI Platform's TrainingInput") -> Problem:
    leaf = path.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(leaf, sorted(known), n=1)
    return Problem(path, f"not a field {where} has", f"did you mean {close[0]}?" if close else "remove it")


def _tier(ti: dict, prefix: str, warnings: list[Problem], problems: list[Problem]):
    name = ti.get("scaleTier")
    if name is None:
        if ti.get("masterType"):
            warnings.append(Problem(prefix + "scaleTier", "missing; read as CUSTOM since masterType is set", ""))
            return None
        name = "BASIC"
        warnings.append(Problem(prefix + "scaleTier", "missing; read as BASIC, AI Platform's default", ""))
    name = str(name).upper()
    if name == "CUSTOM":
        if not ti.get("masterType"):
            problems.append(Problem(prefix + "masterType", "scaleTier CUSTOM needs a masterType",
                                    "set masterType, e.g. n1-standard-8"))
        return None
    if name in TPU_TIERS:
        problems.append(Problem(prefix + "scaleTier", f"{name} (\"{TPU_TIERS[name]}\"): trainjobs templates "
                                "run on CPUs and GPUs, not TPUs", "use CUSTOM with GPU machines"))
        return None
    tier = SCALE_TIERS.get(name)
    if tier is None:
        problems.append(Problem(prefix + "scaleTier", f"unknown scale tier {name!r}",
                                f"use one of CUSTOM, {', '.join(SCALE_TIERS)}"))
        return None
    shape = "a chief" + (f", {tier.workers} workers and {tier.parameter_servers} parameter servers"
                         if tier.workers else " only")
    warnings.append(Problem(prefix + "scaleTier", f"{name} (Google: \"{tier.documented}\") became {shape}, on "
                            f"the legacy {tier.chief!r} machine",
                            "check the replica counts and machine types; change them in the template if not"))
    for key in sorted(_ROLE_KEYS & set(ti)):
        if key != "masterConfig":
            problems.append(Problem(prefix + key, f"scale tier {name} sets the machines itself",
                                    "use scaleTier: CUSTOM to choose machines, or remove it"))
    return tier


def _pool(ti: dict, prefix: str, role: str, type_key: str, count_key: str | None, config_key: str, tier,
          args: list[str], problems: list[Problem], warnings: list[Problem]) -> Pool | None:
    where = prefix + config_key
    if tier is not None:
        count = {"master": 1, "worker": tier.workers, "parameterServer": tier.parameter_servers}.get(role, 0)
        machine_name = tier.chief
    else:
        count = 1 if count_key is None else _count(ti, prefix + count_key, problems)
        machine_name = ti.get(type_key)
    config = ti.get(config_key) or {}
    if not isinstance(config, dict):
        problems.append(Problem(where, "must be a mapping", ""))
        config = {}
    if count == 0:
        if config or (machine_name and tier is None and count_key and ti.get(type_key)):
            warnings.append(Problem(prefix + (count_key or type_key), f"{role} settings given with no "
                                    f"{role} replicas: not kept", f"set {count_key} to use them"))
        return None
    if not machine_name:
        needs = "needs" if count == 1 else "need"
        problems.append(Problem(prefix + type_key, f"{plural(count, role + ' replica')} {needs} a machine type",
                                f"set {type_key}"))
        return None
    for key in sorted(set(config) - _REPLICA_KEYS):
        problems.append(_unknown(f"{where}.{key}", _REPLICA_KEYS, "AI Platform's ReplicaConfig"))
    if config.get("tpuTfVersion") is not None:
        problems.append(Problem(f"{where}.tpuTfVersion", "TPUs cannot be used by a trainjobs template",
                                "use GPU machines"))
    pool = Pool(where, "", count)
    machine_where = prefix + ("scaleTier" if tier is not None else type_key)
    _machine(pool, machine_where, str(machine_name), config.get("acceleratorConfig"), problems, warnings)
    pool.image_uri = str(config.get("imageUri") or "")
    pool.command = _strings(config, "containerCommand", where + ".", problems)
    container_args = _strings(config, "containerArgs", where + ".", problems)
    if (container_args or pool.command) and args:
        key = "containerArgs" if container_args else "containerCommand"
        problems.append(Problem(f"{where}.{key}", f"AI Platform refuses {key} together with trainingInput.args",
                                "keep one of them"))
    pool.args = container_args or list(args)
    disk = config.get("diskConfig")
    if disk is not None:
        pool.disk = _disk(f"{where}.diskConfig", disk, problems)
    return pool


def _machine(pool: Pool, where: str, name: str, accel_config: Any, problems: list[Problem],
             warnings: list[Problem]) -> None:
    if name == "cloud_tpu":
        problems.append(Problem(where, "cloud_tpu: trainjobs templates run on CPUs and GPUs, not TPUs",
                                "use a GPU machine"))
        return
    legacy = legacy_machine(where, name)
    if legacy is not None:
        machine, warning = legacy
        warnings.append(warning)
        pool.machine_type, pool.accelerator_type, pool.accelerator_count = (
            machine.machine_type, machine.accelerator_type, machine.accelerator_count)
        if accel_config:
            problems.append(Problem(where, f"legacy machine type {name!r} comes with its own GPUs; "
                                    "acceleratorConfig is for Compute Engine machine types",
                                    "use a Compute Engine machine type with acceleratorConfig, or drop it"))
        return
    pool.machine_type = name
    if not accel_config:
        return
    if not isinstance(accel_config, dict) or set(accel_config) - {"count", "type"}:
        problems.append(Problem(f"{pool.where}.acceleratorConfig", "takes only count and type", ""))
        return
    accel = str(accel_config.get("type") or "")
    if accel in TPU_ACCELERATORS:
        problems.append(Problem(f"{pool.where}.acceleratorConfig.type", f"{accel}: TPUs cannot be used by a "
                                "trainjobs template", "use an NVIDIA GPU type"))
        return
    if accel in RETIRED_ACCELERATORS:
        new = RETIRED_ACCELERATORS[accel]
        warnings.append(Problem(f"{pool.where}.acceleratorConfig.type", f"{accel} reached end of support on "
                                f"Google Cloud; became {new}", "check the GPU type suits the job"))
        accel = new
    if not accel or "count" not in accel_config:
        problems.append(Problem(f"{pool.where}.acceleratorConfig", "needs both type and count",
                                "write e.g. acceleratorConfig: {type: NVIDIA_TESLA_T4, count: 1}"))
        return
    pool.accelerator_type = accel
    pool.accelerator_count = _int(f"{pool.where}.acceleratorConfig.count", accel_config["count"], problems)


def _disk(where: str, disk: Any, problems: list[Problem]) -> dict | None:
    if not isinstance(disk, dict) or set(disk) - {"bootDiskType", "bootDiskSizeGb"}:
        problems.append(Problem(where, "takes only bootDiskType and bootDiskSizeGb", ""))
        return None
    out = {}
    if "bootDiskType" in disk:
        out["boot_disk_type"] = disk["bootDiskType"]
    if "bootDiskSizeGb" in disk:
        out["boot_disk_size_gb"] = _int(f"{where}.bootDiskSizeGb", disk["bootDiskSizeGb"], problems)
    return out


def _count(ti: dict, where: str, problems: list[Problem]) -> int:
    key = where.rsplit(".", 1)[-1]
    return _int(where, ti.get(key, 0), problems)


def _int(where: str, value: Any, problems: list[Problem]) -> int:
    # int64 fields come as JSON strings from the API ("4") and as numbers from hand-written YAML.
    n = numbers.whole(where, value, problems)
    return 0 if n is None else n


def _strings(d: dict, key: str, prefix: str, problems: list[Problem]) -> list[str]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                              for v in value):
        problems.append(Problem(prefix + key, "must be a list of strings", 'write e.g. ["--epochs", "3"]'))
        return []
    return [str(v) for v in value]


def _scheduling(ti: dict, prefix: str, extra: dict, warnings: list[Problem], problems: list[Problem]) -> None:
    s = ti.get("scheduling")
    if s is None:
        return
    where = prefix + "scheduling"
    if not isinstance(s, dict):
        problems.append(Problem(where, "must be a mapping", ""))
        return
    for key in sorted(set(s) - _SCHEDULING_KEYS):
        problems.append(_unknown(f"{where}.{key}", _SCHEDULING_KEYS, "AI Platform's Scheduling"))
    sched = {}
    for key, name in (("maxRunningTime", "timeout_seconds"), ("maxWaitTime", "max_wait_duration_seconds")):
        if s.get(key) is not None:
            seconds = _seconds(f"{where}.{key}", s[key], problems)
            if seconds is not None:
                sched[name] = seconds
    if s.get("priority") is not None:
        warnings.append(Problem(f"{where}.priority", "not kept: Vertex custom jobs have no priority", ""))
    if sched:
        extra["scheduling"] = sched


def _seconds(where: str, value: Any, problems: list[Problem]) -> int | None:
    m = _DURATION.match(str(value).strip())
    if not m:
        problems.append(Problem(where, f"{value!r} is not a duration", 'write seconds with an "s", e.g. "7200s"'))
        return None
    if m.group(2) and int(m.group(2)):
        problems.append(Problem(where, f"{value!r}: trainjobs keeps whole seconds", "round it to whole seconds"))
        return None
    return numbers.whole(where, m.group(1), problems)
