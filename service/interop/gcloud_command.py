"""A `gcloud ai custom-jobs create ...` command line -> pools and the spec's other fields.

Flags that describe what runs become template fields; flags that only say where or
how gcloud sends it (--region, --project, gcloud-wide flags) are reported as
warnings, since a template has neither (the service's settings decide); flags that
change the job in ways a template cannot express are refused (422)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service.core.errors import Problem
from service.interop import vertex_config
from service.interop.gcloud_flags import parse_dict, parse_pool, split_list
from service.interop.pools import Pool
from service.interop.shell_text import read_command

_PREFIXES = (["gcloud", "ai", "custom-jobs", "create"], ["gcloud", "beta", "ai", "custom-jobs", "create"],
             ["gcloud", "alpha", "ai", "custom-jobs", "create"])
_VALUE_FLAGS = {"--region", "--project", "--display-name", "--worker-pool-spec", "--args", "--command", "--labels",
                "--service-account", "--network", "--config"}
_BOOL_FLAGS = {"--enable-web-access"}
# Where and how gcloud sends the request; nothing about the job.
_NOT_KEPT = {"--region": "a template has no region: the service's TRAINJOBS_VERTEX_LOCATION decides",
             "--project": "a template has no project: the service's TRAINJOBS_VERTEX_PROJECT decides",
             "--display-name": "each job gets its own display name (the template's name and the job's id, or the "
                               "job's display_name)"}
_GCLOUD_WIDE = {"--quiet", "-q", "--verbosity", "--format", "--account", "--configuration", "--log-http",
                "--user-output-enabled", "--impersonate-service-account", "--billing-project", "--trace-token",
                "--flags-file", "--flatten", "--help"}
_REFUSED = {
    "--python-package-uris": "build an image with the package and use container-image-uri",
    "--enable-dashboard-access": "trainjobs does not set up dashboard access; remove the flag",
    "--persistent-resource-id": "trainjobs launches on demand; remove the flag",
    "--kms-key": "trainjobs does not set customer-managed encryption keys; remove the flag",
    "--kms-keyring": "as --kms-key", "--kms-location": "as --kms-key", "--kms-project": "as --kms-key",
}


@dataclass
class Parsed:
    pools: list[Pool | None] = field(default_factory=list)
    extra: dict = field(default_factory=dict)   # spec fields beside the pools
    display_name: str | None = None


def parse(text: str, warnings: list[Problem], load_yaml: Callable[[str], Any]) -> tuple[Parsed, list[Problem]]:
    try:
        files, words = read_command(text)
    except ValueError as e:  # an unclosed quote
        return Parsed(), [shell_problem(e)]
    return parse_words(files, words, warnings, load_yaml)


def shell_problem(e: ValueError) -> Problem:
    return Problem("source", f"not a shell command line: {e}", "check the quotes")


def parse_words(files: dict[str, str], words: list[str], warnings: list[Problem],
                load_yaml: Callable[[str], Any]) -> tuple[Parsed, list[Problem]]:
    prefix = next((p for p in _PREFIXES if words[:len(p)] == p), None)
    if prefix is None:
        return Parsed(), [Problem("source", "not a `gcloud ai custom-jobs create` command",
                                  "paste the whole command, starting with gcloud ai custom-jobs create")]
    flags, problems = _flags(words[len(prefix):])
    out = Parsed()
    if "--config" in flags:
        problems += _config(flags, files, out, warnings, load_yaml)
    else:
        args = split_list(flags["--args"][-1]) if "--args" in flags else []
        command = split_list(flags["--command"][-1]) if "--command" in flags else []
        for i, value in enumerate(flags.get("--worker-pool-spec", [])):
            pool, bad = parse_pool(f"--worker-pool-spec[{i}]", value, args, command)
            out.pools.append(pool)
            problems += bad
        if not flags.get("--worker-pool-spec"):
            problems.append(Problem("--worker-pool-spec", "missing", "give one --worker-pool-spec per pool"))
    if "--labels" in flags:
        labels, bad = parse_dict("--labels", flags["--labels"][-1])
        problems += bad
        out.extra["labels"] = labels
    if "--service-account" in flags:
        out.extra["service_account"] = flags["--service-account"][-1]
    if "--network" in flags:
        out.extra["network"] = flags["--network"][-1]
    if "--enable-web-access" in flags:
        out.extra["enable_web_access"] = True
    if "--display-name" in flags:
        out.display_name = flags["--display-name"][-1]
    for flag, why in _NOT_KEPT.items():
        if flag in flags:
            warnings.append(Problem(flag, f"not kept: {why}", ""))
    for flag in sorted(set(flags) & _GCLOUD_WIDE):
        warnings.append(Problem(flag, "not kept: a gcloud-wide flag, not part of the job", ""))
    return out, problems


def _config(flags: dict, files: dict[str, str], out: Parsed, warnings: list[Problem],
            load_yaml: Callable[[str], Any]) -> list[Problem]:
    path = flags["--config"][-1]
    if path not in files:
        return [Problem("--config", f"{path} is not in the text", "import the file itself with format "
                        "vertex-config, or put it before the command as cat > FILE <<'EOF' ... EOF")]
    mixed = sorted({"--worker-pool-spec", "--args", "--command"} & set(flags))
    if mixed:
        return [Problem(mixed[0], "given with --config: gcloud lets flags override parts of the file",
                        "put everything in the config file, or use flags only")]
    pools, extra, problems = vertex_config.convert(load_yaml(files[path]), warnings)
    out.pools, out.extra = pools, extra
    return [p.prefixed("--config") for p in problems]


def _flags(words: list[str]) -> tuple[dict[str, list[str]], list[Problem]]:
    flags: dict[str, list[str]] = {}
    problems: list[Problem] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            problems.append(Problem("source", f"unexpected argument {word!r}",
                                    "gcloud ai custom-jobs create takes flags only"))
            continue
        name, sep, value = word.partition("=")
        if name in _REFUSED:
            problems.append(Problem(name, "cannot be honoured by a trainjobs template", _REFUSED[name]))
            if not sep and name != "--enable-dashboard-access" and i < len(words):
                i += 1
            continue
        if name in _BOOL_FLAGS or (name in _GCLOUD_WIDE and name in ("--quiet", "-q", "--log-http", "--help")):
            if sep:
                problems.append(Problem(name, "takes no value", f"write {name} alone to turn it on, or leave it out"))
            flags.setdefault(name, []).append("true")
            continue
        if name not in _VALUE_FLAGS and name not in _GCLOUD_WIDE:
            problems.append(Problem(name, "not a flag trainjobs knows for gcloud ai custom-jobs create",
                                    f"use only {', '.join(sorted(_VALUE_FLAGS | _BOOL_FLAGS))}"))
            if not sep and i < len(words) and not words[i].startswith("-"):
                i += 1
            continue
        if not sep:
            if i >= len(words):
                problems.append(Problem(name, "has no value", f"write {name}=VALUE"))
                continue
            value = words[i]
            i += 1
        flags.setdefault(name, []).append(value)
    for name, values in flags.items():
        if len(values) > 1 and name != "--worker-pool-spec":
            problems.append(Problem(name, "given more than once", "give it once"))
    return flags, problems
