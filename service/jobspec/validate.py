"""Rules a spec must meet before anything is launched. Each broken rule is a
Problem naming the field and the fix; all of them are reported at once."""
from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Collection, Iterator

from service.core.errors import Problem
from service.core.text import control_problem
from service.jobspec import vertex_names
from service.jobspec.machines import check_machine
from service.jobspec.parameters import references
from service.jobspec.reserved import RESERVED_LABEL_PREFIXES
from service.jobspec.spec import JobSpec, ReductionServer

# CustomJob.labels (Vertex AI REST reference): "Label keys and values can be no longer
# than 64 characters (Unicode codepoints), can only contain lowercase letters, numeric
# characters, underscores and dashes. International characters are allowed." Keys
# start with a letter (Google Cloud's label rules: "a lowercase letter or international
# character"); at most 64 labels. As regular expressions Google writes these
# \p{Ll}\p{Lo} (letters) and \p{N} (numbers).
MAX_LABEL_CHARS = 64
MAX_LABELS = 64
_LETTERS = ("Ll", "Lo")
_NUMBERS = ("Nd", "Nl", "No")
MAX_DISPLAY_NAME = 128


def check_spec(spec: JobSpec, unknown: Collection[str] = ()) -> list[Problem]:
    """Every rule the spec breaks. `unknown`: dotted paths whose values did not validate
    (jobspec.partial: the spec holds defaults there); a rule that reads one is not run, and
    when what it waits for lies outside its own field (whose schema problem is reported
    already), a problem says it was not checked and why, so no check disappears silently."""
    problems: list[Problem] = []
    for field, what, needs, rule in _rules(spec):
        blocked = sorted({u for u in unknown for n in needs if n == u or n.startswith(u + ".")})
        if not blocked:
            problems += rule()
        elif any(not (b == field or b.startswith(field + ".")) for b in blocked):
            problems.append(Problem(field, f"{what} not checked: {', '.join(blocked)} must be valid first",
                                    "fix the problems reported there and submit again"))
    return problems


Rule = tuple[str, str, tuple[str, ...], Callable[[], list[Problem]]]


def _rules(spec: JobSpec) -> Iterator[Rule]:
    """(field, what, the paths it reads, the check), each independent of the others, so a
    broken field holds back only the rules that read it (each pool's count on its own)."""
    yield ("chief.replica_count", "the chief's replica count", ("chief.replica_count",), lambda: [
        Problem("chief.replica_count",
                f"the chief (pool 0) must have exactly 1 replica, not {spec.chief.replica_count}",
                "set chief.replica_count to 1 and put extra replicas in workers")]
        if spec.chief.replica_count != 1 else [])
    evaluator = spec.evaluator
    yield ("evaluator.replica_count", "the evaluator's replica count", ("evaluator.replica_count",), lambda: [
        Problem("evaluator.replica_count",
                f"TensorFlow supports at most one evaluator, not {evaluator.replica_count}",
                "set evaluator.replica_count to 1")]
        if evaluator and evaluator.replica_count != 1 else [])
    yield ("parameter_servers", "the strategy's pools", ("distribution", "parameter_servers"),
           lambda: _strategy_pools(spec))
    if spec.reduction_server:
        rs = spec.reduction_server
        yield ("reduction_server", "Reduction Server's rules",
               ("reduction_server", "reduction_server.client_installed", "distribution", "parameter_servers",
                "workers.accelerator_count", "chief.accelerator_count"), lambda: _check_reduction_server(spec, rs))
    for where in ("chief", "workers", "parameter_servers", "evaluator"):
        role = getattr(spec, where)
        needs = (where, f"{where}.machine_type", f"{where}.accelerator_type", f"{where}.accelerator_count")
        # Absent: nothing to check; dropped as invalid: it waits, as above.
        yield (where, f"the machine and accelerators of {where}", needs, functools.partial(
            check_machine, where, role.machine_type, role.accelerator_type, role.accelerator_count)
            if role is not None else list)
    if spec.reduction_server:
        machine = spec.reduction_server.machine_type
        yield ("reduction_server", "Reduction Server's machine", ("reduction_server.machine_type",),
               lambda: check_machine("reduction_server", machine, None, 0))
    yield ("labels", "the labels", ("labels",), lambda: check_labels("labels", spec.labels))
    # Its name has the parameters' values in it: it waits for them too ("parameters" unknown).
    run_needs = ("experiment", "experiment_run") + (
        ("parameters",) if spec.experiment_run and references(spec.experiment_run) else ())
    yield ("experiment_run", "the experiment run's name", run_needs,
           lambda: vertex_names.check_run(spec.experiment, spec.experiment_run))
    if spec.model_upload is not None:
        labels = spec.model_upload.labels
        yield ("model_upload.labels", "the model's labels", ("model_upload.labels",),
               lambda: check_labels("model_upload.labels", labels))


def _strategy_pools(spec: JobSpec) -> list[Problem]:
    problems = []
    if spec.parameter_servers and spec.distribution != "parameter_server":
        problems.append(Problem("parameter_servers",
                                "parameter servers need a parameter-server strategy template",
                                'set distribution to "parameter_server" or remove parameter_servers'))
    if spec.distribution == "parameter_server" and not spec.parameter_servers:
        problems.append(Problem("parameter_servers", "a parameter_server job needs parameter servers",
                                "add parameter_servers with replica_count >= 1"))
    return problems


def _check_reduction_server(spec: JobSpec, rs: ReductionServer) -> list[Problem]:
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
    if not rs.client_installed:
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


def _label_char(ch: str) -> bool:
    return ch in "_-" or unicodedata.category(ch) in _LETTERS + _NUMBERS


def label_key_ok(key: str) -> bool:
    return (0 < len(key) <= MAX_LABEL_CHARS and unicodedata.category(key[0]) in _LETTERS
            and all(_label_char(c) for c in key))


def label_value_ok(value: str) -> bool:
    return len(value) <= MAX_LABEL_CHARS and all(_label_char(c) for c in value)


def check_labels(where: str, labels: dict[str, str], *, allow_reserved: bool = False) -> list[Problem]:
    problems = []
    if len(labels) > MAX_LABELS:
        problems.append(Problem(where, f"{len(labels)} labels; Google allows at most {MAX_LABELS}",
                                "drop some labels"))
    for key, value in labels.items():
        if not label_key_ok(key):
            problems.append(Problem(f"{where}.{key}",
                                    f"label keys are 1-{MAX_LABEL_CHARS} lowercase letters (international ones "
                                    "too), digits, _ or -, starting with a letter",
                                    f"rename it, e.g. {_suggest_key(key)!r}"))
        elif key.startswith(RESERVED_LABEL_PREFIXES) and not allow_reserved:
            problems.append(Problem(f"{where}.{key}", "keys starting with "
                                    f"{' or '.join(repr(p) for p in RESERVED_LABEL_PREFIXES)} are reserved "
                                    "for trainjobs' own labels", "choose another key"))
        if not isinstance(value, str) or not label_value_ok(value):
            problems.append(Problem(f"{where}.{key}",
                                    f"label values are 0-{MAX_LABEL_CHARS} lowercase letters (international ones "
                                    "too), digits, _ or -",
                                    f"use e.g. {_suggest_value(str(value))!r}"))
    return problems


def _suggest_key(key: str) -> str:
    s = _suggest_value(key)
    if not s or unicodedata.category(s[0]) not in _LETTERS:
        s = "k" + s
    return s[:MAX_LABEL_CHARS]


def _suggest_value(value: str) -> str:
    return "".join(c if _label_char(c) else "-" for c in value.lower())[:MAX_LABEL_CHARS]


def check_display_name(name: str) -> list[Problem]:
    if not name.strip():
        return [Problem("display_name", "must not be empty", "give the job a name")]
    if len(name) > MAX_DISPLAY_NAME:
        return [Problem("display_name", f"{len(name)} characters; Vertex allows at most {MAX_DISPLAY_NAME}",
                        f"shorten it to {MAX_DISPLAY_NAME} characters")]
    problem = control_problem(name)
    if problem:  # escapes and bidi overrides would act on every terminal and page that shows it
        return [Problem("display_name", problem, "use printable characters only")]
    return []
