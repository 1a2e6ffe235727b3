"""A compiled CustomJob (its JSON, as launched) -> the same job for gcloud or the Vertex SDK.

Three forms: `gcloud ai custom-jobs create` flags, the `--config` YAML (a
CustomJobSpec in camelCase: gcloud refuses keys with underscores), and a Vertex
SDK snippet (`aiplatform.CustomJob(...)`, `job.run(...)`). gcloud's flags cannot
say everything a CustomJob holds: `--args`/`--command` apply to every pool, and
there is no flag for environment variables, disks, scheduling or the output
directory. When the job needs any of those, the gcloud form writes the config
file first and passes it with --config, saying why in a comment. trainjobs' own
labels (trainjobs_job_id...) are left out: the Vertex backend finds its jobs by
them and would take a hand-launched copy for its own."""
from __future__ import annotations

import pprint
import re
import shlex
from typing import Any

import yaml

from service.interop.gcloud_flags import join_dict, join_list, pool_value
from service.interop.pools import DEFAULT_DISK
from service.jobspec.reserved import RESERVED_LABEL_PREFIXES

FORMATS = ("gcloud", "config", "sdk")
_FLAG_FIELDS = {"workerPoolSpecs", "scheduling", "serviceAccount", "network", "enableWebAccess"}
_HEREDOC = "TRAINJOBS_CONFIG_EOF"


def render(fmt: str, custom_job: dict, *, region: str, project: str | None, title: str) -> str:
    # The title goes in a comment line: a display name with a line break must not end it
    # (the next line would run in a shell, or in Python).
    title = " ".join(title.split())
    job = _public(custom_job)
    if fmt == "gcloud":
        return gcloud(job, region=region, project=project, title=title)
    if fmt == "config":
        return f"# {title}\n# gcloud ai custom-jobs create --region={region} --display-name=... --config=THIS_FILE\n" \
               + config_yaml(job["jobSpec"])
    return sdk(job, region=region, project=project, title=title)


def _public(custom_job: dict) -> dict:
    labels = {k: v for k, v in (custom_job.get("labels") or {}).items() if not k.startswith(RESERVED_LABEL_PREFIXES)}
    out = {k: v for k, v in custom_job.items() if k != "labels"}
    if labels:
        out["labels"] = labels
    return out


def config_yaml(job_spec: dict) -> str:
    return yaml.safe_dump(_ints(job_spec), sort_keys=False, allow_unicode=True, width=100)


def _ints(value: Any) -> Any:
    # replicaCount is int64, a string in proto3 JSON; YAML readers (and people) expect a number.
    if isinstance(value, dict):
        return {k: int(v) if k == "replicaCount" else _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def why_config(job_spec: dict) -> str | None:
    """Why the flags alone cannot express this CustomJobSpec (None: they can)."""
    extra = sorted(set(job_spec) - _FLAG_FIELDS)
    if extra:
        return f"it sets {', '.join(extra)}, which no flag of gcloud ai custom-jobs create sets"
    sched = {k: v for k, v in (job_spec.get("scheduling") or {}).items() if not (k == "strategy" and v == "STANDARD")}
    if sched:
        return f"it sets scheduling ({', '.join(sched)}), which no flag sets"
    pools = [p for p in job_spec.get("workerPoolSpecs", []) if p]
    shapes = set()
    for p in pools:
        if set(p) - {"machineSpec", "replicaCount", "diskSpec", "containerSpec"} or "containerSpec" not in p:
            return "a pool is not a plain container pool"
        disk = p.get("diskSpec")
        if disk and {"boot_disk_type": disk.get("bootDiskType", "pd-ssd"),
                     "boot_disk_size_gb": disk.get("bootDiskSizeGb", 100)} != DEFAULT_DISK:
            return "a pool's boot disk is not Vertex's default (pd-ssd, 100 GB), and no flag sets disks"
        c = p["containerSpec"]
        if c.get("env"):
            return "its pools set environment variables, and no flag sets them"
        shape = (tuple(c.get("command", [])), tuple(c.get("args", [])))
        if any(words and words[-1] == "" for words in shape):
            return "an argument list ends with an empty argument, which gcloud's list flags drop"
        shapes.add(shape)
    if len(shapes) > 1:
        return "its pools run different commands or arguments, and --command/--args apply to every pool"
    return None


def gcloud(job: dict, *, region: str, project: str | None, title: str) -> str:
    spec = job["jobSpec"]
    head = ["gcloud", "ai", "custom-jobs", "create", f"--region={region}"]
    if project:
        head.append(f"--project={project}")
    head.append(f"--display-name={job['displayName']}")
    labels = [f"--labels={join_dict(job['labels'])}"] if job.get("labels") else []
    reason = why_config(spec)
    if reason is not None:
        path = "trainjobs-customjob.yaml"
        body = config_yaml(spec)
        lines, delim, n = set(body.splitlines()), _HEREDOC, 0
        while delim in lines:
            n += 1
            delim = f"{_HEREDOC}_{n}"
        return (f"# {title}\n# The pools go in a --config file: {reason}.\n"
                f"cat > {path} <<'{delim}'\n{body}{delim}\n" + _command(head + [f"--config={path}"] + labels))
    flags = [f"--worker-pool-spec={pool_value(p)}" for p in spec["workerPoolSpecs"]]
    first = next(p for p in spec["workerPoolSpecs"] if p)["containerSpec"]
    if first.get("command"):
        flags.append(f"--command={join_list(first['command'])}")
    if first.get("args"):
        flags.append(f"--args={join_list(first['args'])}")
    flags += labels
    if spec.get("serviceAccount"):
        flags.append(f"--service-account={spec['serviceAccount']}")
    if spec.get("network"):
        flags.append(f"--network={spec['network']}")
    if spec.get("enableWebAccess"):
        flags.append("--enable-web-access")
    return f"# {title}\n" + _command(head + flags)


def _command(words: list[str]) -> str:
    return " \\\n  ".join([" ".join(words[:4])] + [shlex.quote(w) for w in words[4:]]) + "\n"


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): (int(v) if k == "replicaCount" else _snake(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _seconds(duration: str | None) -> int | None:
    return int(float(duration.rstrip("s"))) if duration else None


def sdk(job: dict, *, region: str, project: str | None, title: str) -> str:
    spec = job["jobSpec"]
    pools = pprint.pformat(_snake(spec["workerPoolSpecs"]), indent=4, width=100, sort_dicts=False)
    ctor = [f"    display_name={job['displayName']!r},", f"    worker_pool_specs={pools},"]
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        ctor.append(f"    base_output_dir={base!r},")
    if job.get("labels"):
        ctor.append(f"    labels={job['labels']!r},")
    sched = spec.get("scheduling") or {}
    run: list[str] = []
    for key, name in (("serviceAccount", "service_account"), ("network", "network")):
        if spec.get(key):
            run.append(f"    {name}={spec[key]!r},")
    if sched.get("timeout"):
        run.append(f"    timeout={_seconds(sched['timeout'])},")
    for key, name in (("restartJobOnWorkerRestart", "restart_job_on_worker_restart"),
                      ("disableRetries", "disable_retries")):
        if sched.get(key):
            run.append(f"    {name}=True,")
    if spec.get("enableWebAccess"):
        run.append("    enable_web_access=True,")
    if sched.get("strategy") and sched["strategy"] != "STANDARD":
        run.append(f"    scheduling_strategy=gca_custom_job.Scheduling.Strategy.{sched['strategy']},")
    if sched.get("maxWaitDuration"):
        run.append(f"    max_wait_duration={_seconds(sched['maxWaitDuration'])},")
    lines = [f"# {title}", "# pip install google-cloud-aiplatform", "from google.cloud import aiplatform"]
    if any("scheduling_strategy" in r for r in run):
        lines.append("from google.cloud.aiplatform.compat.types import custom_job as gca_custom_job")
    init = f"project={project!r}, location={region!r}" if project else f"location={region!r}"
    if base:
        # The SDK refuses to build a CustomJob without a staging bucket, even with base_output_dir set.
        bucket = "/".join(base.split("/")[:3]) if base.startswith("gs://") else "gs://YOUR_BUCKET"
        lines += ["", "# staging_bucket: the SDK requires one; this job writes under base_output_dir."]
    else:
        bucket = "gs://YOUR_BUCKET"
        lines += ["", "# staging_bucket: the SDK requires one, and since this job sets no output directory the SDK",
                  "# adds <bucket>/aiplatform-custom-job-<time> as its base output directory (AIP_MODEL_DIR...)."]
    lines += [f"aiplatform.init({init}, staging_bucket={bucket!r})", "", "job = aiplatform.CustomJob(", *ctor, ")"]
    lines += ["job.run(", *run, ")"] if run else ["job.run()"]
    return "\n".join(lines) + "\n"
