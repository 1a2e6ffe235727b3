"""Rules a spec must meet before anything is launched. Each broken rule is a
Problem naming the field and the fix; all of them are reported at once."""
from __future__ import annotations

import re

from service.errors import Problem
from service.jobspec.machines import check_machine
from service.jobspec.spec import JobSpec

_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
RESERVED_LABEL_PREFIX = "trainjobs-"
MAX_DISPLAY_NAME = 128


def check_spec(spec: JobSpec) -> list[Problem]:
    problems: list[Problem] = []
    if spec.chief.replica_count != 1:
        problems.append(Problem("chief.replica_count",
                                f"the chief (pool 0) must have exactly 1 replica, not {spec.chief.replica_count}",
                                "set chief.replica_count to 1 and put extra replicas in workers"))
    if spec.evaluator and spec.evaluator.replica_count != 1:
        problems.append(Problem("evaluator.replica_count",
                                f"TensorFlow supports at most one evaluator, not {spec.evaluator.replica_count}",
                                "set evaluator.replica_count to 1"))
    if spec.parameter_servers and spec.distribution != "parameter_server":
        problems.append(Problem("parameter_servers",
                                "parameter servers need a parameter-server strategy template",
                                'set distribution to "parameter_server" or remove parameter_servers'))
    if spec.distribution == "parameter_server":
        if not spec.parameter_servers:
            problems.append(Problem("parameter_servers", "a parameter_server job needs parameter servers",
                                    "add parameter_servers with replica_count >= 1"))
    if spec.reduction_server:
        problems += _check_reduction_server(spec)

    for where, role in _roles(spec):
        problems += check_machine(where, role.machine_type, role.accelerator_type, role.accelerator_count)
    if spec.reduction_server:
        problems += check_machine("reduction_server", spec.reduction_server.machine_type, None, 0)
    problems += check_labels("labels", spec.labels)
    return problems


def _check_reduction_server(spec: JobSpec) -> list[Problem]:
    problems = []
    if spec.parameter_servers:
        problems.append(Problem("reduction_server",
                                "Reduction Server and parameter servers both need pool 2",
                                "remove one of reduction_server or parameter_servers"))
    if spec.distribution != "multi_worker_mirrored":
        problems.append(Problem("reduction_server", "Reduction Server speeds up all-reduce; "
                                "it does not work with the parameter_server distribution",
                                'use distribution "multi_worker_mirrored" or remove reduction_server'))
    if not spec.workers or not spec.workers.accelerator_count:
        problems.append(Problem("reduction_server",
                                "Reduction Server needs GPU workers using NCCL all-reduce",
                                "give workers an accelerator_type and accelerator_count, "
                                "or remove reduction_server"))
    elif not spec.chief.accelerator_count:
        problems.append(Problem("chief.accelerator_count",
                                "with Reduction Server the chief takes part in NCCL all-reduce and needs GPUs too",
                                "give the chief the same accelerators as the workers"))
    if not spec.reduction_server.client_installed:
        # The service cannot look inside images, so their template must say so.
        problems.append(Problem(
            "reduction_server.client_installed",
            "Reduction Server only works when the chief and worker images include Google's reduction client "
            "(the google-reduction-server package, which NCCL loads); without it the workers all-reduce among "
            "themselves and the reducer pool idles, billed. The packaged trainer image does not include it",
            "use images that have it (Google's prebuilt TensorFlow GPU training containers do; a custom image "
            "installs the package as Google's Reduction Server docs show) and set "
            "reduction_server.client_installed to true, or remove reduction_server"))
    return problems


def _roles(spec: JobSpec):
    yield "chief", spec.chief
    for name in ("workers", "parameter_servers", "evaluator"):
        role = getattr(spec, name)
        if role is not None:
            yield name, role


def check_labels(where: str, labels: dict[str, str], *, allow_reserved: bool = False) -> list[Problem]:
    problems = []
    if len(labels) > 64:
        problems.append(Problem(where, f"{len(labels)} labels; Google allows at most 64", "drop some labels"))
    for key, value in labels.items():
        if not _LABEL_KEY.match(key):
            problems.append(Problem(f"{where}.{key}",
                                    "label keys are 1-63 lowercase letters, digits, _ or -, starting with a letter",
                                    f"rename it, e.g. {_suggest_key(key)!r}"))
        elif key.startswith(RESERVED_LABEL_PREFIX) and not allow_reserved:
            problems.append(Problem(f"{where}.{key}", f"keys starting with {RESERVED_LABEL_PREFIX!r} are reserved "
                                    "for trainjobs' own labels", "choose another key"))
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            problems.append(Problem(f"{where}.{key}",
                                    "label values are 0-63 lowercase letters, digits, _ or -",
                                    f"use e.g. {_suggest_value(str(value))!r}"))
    return problems


def _suggest_key(key: str) -> str:
    s = _suggest_value(key)
    if not s or not s[0].isalpha():
        s = "k" + s
    return s[:63]


def _suggest_value(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def check_display_name(name: str) -> list[Problem]:
    if not name.strip():
        return [Problem("display_name", "must not be empty", "give the job a name")]
    if len(name) > MAX_DISPLAY_NAME:
        return [Problem("display_name", f"{len(name)} characters; Vertex allows at most {MAX_DISPLAY_NAME}",
                        f"shorten it to {MAX_DISPLAY_NAME} characters")]
    return []
