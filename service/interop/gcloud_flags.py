"""gcloud's flag value syntax, both ways, and `--worker-pool-spec` values as pools.

`--worker-pool-spec` is an ArgDict (key=value,key=value) and `--args`/`--command`
are ArgLists (a,b,c), split on commas unless the value starts with `^D^`, which
makes D the delimiter instead (`gcloud topic escaping`). gcloud's keys for a pool
(googlecloudsdk/command_lib/ai/custom_jobs/flags.py): machine-type (required),
replica-count (default 1), accelerator-type, accelerator-count (default 1 when a
type is given), container-image-uri; and, for Python code rather than an image,
executor-image-uri, python-module, script, local-package-path, output-image-uri,
requirements, extra-packages, extra-dirs. `--args` and `--command` apply to every
pool with a container image. An empty value is an empty (skipped) pool."""
from __future__ import annotations

from service.core.errors import Problem
from service.interop import numbers
from service.interop.pools import Pool

CONTAINER_KEYS = ("machine-type", "replica-count", "accelerator-type", "accelerator-count", "container-image-uri")
PYTHON_KEYS = ("executor-image-uri", "python-module", "script", "local-package-path", "output-image-uri",
               "requirements", "extra-packages", "extra-dirs")
_DELIMS = (",", ";", ":", "|", "@", "~", "+", "!")


def split_list(value: str) -> list[str]:
    """An ArgList value as gcloud reads it."""
    delim, rest = ",", value
    if value.startswith("^"):
        end = value.find("^", 1)
        if end > 1:
            delim, rest = value[1:end], value[end + 1:]
    # gcloud's own tokenizer: a trailing delimiter ends the list ("a,b," is two items).
    if not rest:
        return []
    return (rest if rest.endswith(delim) else rest + delim).split(delim)[:-1]


def join_list(items: list[str]) -> str:
    """An ArgList value gcloud reads back as `items` (escaping the delimiter when an item has a comma).
    A last item that is empty cannot be written (gcloud drops a trailing delimiter): see export.why_config."""
    if not any("," in i for i in items) and not (items and items[0].startswith("^")):
        return ",".join(items)
    for d in _DELIMS[1:]:
        if not any(d in i for i in items):
            return f"^{d}^" + d.join(items)
    raise ValueError("every delimiter gcloud could use appears in these values")


def parse_dict(where: str, value: str) -> tuple[dict[str, str], list[Problem]]:
    items, problems, out = split_list(value), [], {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            problems.append(Problem(where, f"{item!r} is not key=value", "write each item as key=value"))
        elif key in out:
            problems.append(Problem(f"{where}.{key}", "given twice", "give each key once"))
        else:
            out[key] = val
    return out, problems


def join_dict(items: dict[str, str]) -> str:
    return join_list([f"{k}={v}" for k, v in items.items()])


def parse_pool(where: str, value: str, args: list[str], command: list[str]) -> tuple[Pool | None, list[Problem]]:
    """One `--worker-pool-spec` value with the command's --args/--command; None for an empty pool."""
    if value.strip() == "":
        return None, []
    spec, problems = parse_dict(where, value)
    python = [k for k in PYTHON_KEYS if k in spec]
    if python:
        problems.append(Problem(f"{where}.{python[0]}",
                                f"{', '.join(python)}: Python code run in a prebuilt image; trainjobs templates "
                                "run container images",
                                "build an image with the code (`gcloud ai custom-jobs local-run` with the same "
                                "executor-image-uri, local-package-path and python-module builds one), push it and "
                                "give its URI as container-image-uri"))
    unknown = sorted(set(spec) - set(CONTAINER_KEYS) - set(PYTHON_KEYS))
    problems += [Problem(f"{where}.{k}", "not a key gcloud takes in --worker-pool-spec",
                         f"use only {', '.join(CONTAINER_KEYS)}") for k in unknown]
    if "machine-type" not in spec:
        problems.append(Problem(f"{where}.machine-type", "missing (gcloud requires it)",
                                "add machine-type=..., e.g. machine-type=n1-standard-8"))
    if "container-image-uri" not in spec and not python:
        problems.append(Problem(f"{where}.container-image-uri", "missing", "add container-image-uri=IMAGE"))
    replicas = _int(where, spec, "replica-count", 1, problems)
    accel = spec.get("accelerator-type") or None
    count = _int(where, spec, "accelerator-count", 1 if accel else 0, problems)
    if count and not accel:
        problems.append(Problem(f"{where}.accelerator-count", "given without accelerator-type",
                                "add accelerator-type=..., or remove accelerator-count"))
    if problems:
        return None, problems
    return Pool(where, spec["machine-type"], replicas, accel, count,
                spec["container-image-uri"], list(command), list(args)), []


def _int(where: str, spec: dict, key: str, default: int, problems: list[Problem]) -> int:
    if key not in spec:
        return default
    n = numbers.whole(f"{where}.{key}", spec[key], problems, example=f"{key}=1")
    return default if n is None else n


def pool_value(pool: dict) -> str:
    """The `--worker-pool-spec` value of one WorkerPoolSpec (its JSON form, camelCase)."""
    if not pool:
        return ""
    machine = pool.get("machineSpec", {})
    items = {"machine-type": machine.get("machineType", ""), "replica-count": str(pool.get("replicaCount", 1))}
    if machine.get("acceleratorType"):
        items["accelerator-type"] = str(machine["acceleratorType"])
        items["accelerator-count"] = str(machine.get("acceleratorCount", 0))
    items["container-image-uri"] = pool.get("containerSpec", {}).get("imageUri", "")
    return join_dict(items)
