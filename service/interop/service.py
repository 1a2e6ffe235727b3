"""Import AI Platform configs and gcloud flags as templates; export jobs and templates
as gcloud commands, gcloud config files and Vertex SDK snippets."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from service import jobspec
from service.core.errors import Invalid, Problem
from service.interop import (
    aiplatform_config,
    gcloud_command,
    gcloud_flags,
    vertex_config,
)
from service.interop import pools as pools_mod
from service.interop.export import render
from service.interop.import_workers import ImportWorkers
from service.interop.schemas import TemplateImport
from service.interop.settings import InteropSettings
from service.jobs import service as jobs
from service.lifecycle.protocol import Backend
from service.templates import service as templates
from service.templates.schemas import TemplateCreate

_SOURCES = {"aiplatform-config": "an AI Platform Training config", "gcloud": "a gcloud ai custom-jobs create command",
            "worker-pool-specs": "gcloud --worker-pool-spec flags", "vertex-config": "a Vertex CustomJobSpec config"}
_TEXT_ONLY = {"aiplatform-config": "an AI Platform config is YAML text", "vertex-config": "a Vertex config is YAML text",
              "gcloud": "a gcloud command is text"}


def convert(body: TemplateImport, settings: InteropSettings, workers: ImportWorkers) -> tuple[dict, str, list[Problem]]:
    """(spec as stored, description, warnings) or Invalid with every problem. The source's text is
    parsed in an import worker process (service/interop/import_workers.py); only the parsed, bounded
    values are converted here."""
    warnings: list[Problem] = []
    _check_size(body, settings)
    extra: dict = {}
    if body.format == "worker-pool-specs":
        if not isinstance(body.source, list):
            raise Invalid.of([Problem("source", "worker-pool-specs is a list: one --worker-pool-spec value a pool",
                                      'send e.g. ["machine-type=n1-standard-4,container-image-uri=IMAGE"]')])
        pools, problems = [], []
        for i, value in enumerate(body.source):  # key=value lists: str.split, linear
            pool, bad = gcloud_flags.parse_pool(f"source[{i}]", value, [], [])
            pools.append(pool)
            problems += bad
    elif not isinstance(body.source, str):
        raise Invalid.of([Problem("source", _TEXT_ONLY[body.format], "send it as one string")])
    else:
        with workers.lease() as worker:
            def load_yaml(text: str) -> Any:
                return worker.run("yaml", text, settings.yaml)
            if body.format == "aiplatform-config":
                converted, problems = aiplatform_config.convert(load_yaml(body.source), warnings)
                pools, extra = converted.pools, converted.extra
            elif body.format == "vertex-config":
                pools, extra, problems = vertex_config.convert(load_yaml(body.source), warnings)
            else:
                read = worker.run("command", body.source)
                if isinstance(read, str):  # the shell's complaint: an unclosed quote
                    raise Invalid.of([gcloud_command.shell_problem(ValueError(read))])
                files, words = read
                parsed, problems = gcloud_command.parse_words(files, words, warnings, load_yaml)
                pools, extra = parsed.pools, parsed.extra
    if problems:
        raise Invalid.of(problems)
    spec, problems = pools_mod.to_spec(pools, warnings)
    if problems:
        raise Invalid.of(problems)
    spec.update(extra)
    stored, _ = _as_stored(spec)
    description = body.description if body.description is not None else f"Imported from {_SOURCES[body.format]}"
    return stored, description, warnings


def _check_size(body: TemplateImport, settings: InteropSettings) -> None:
    text = body.source if isinstance(body.source, str) else "\n".join(body.source)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > settings.yaml.max_bytes:
        raise Invalid.of([Problem("source", f"{size} bytes; imports take at most {settings.yaml.max_bytes}",
                                  "send a smaller source, or raise TRAINJOBS_IMPORT_MAX_BYTES")])


def _as_stored(spec: dict) -> tuple[dict, jobspec.JobSpec]:
    """The spec with defaults filled in, checked as every template is (the same rules, the same problems)."""
    try:
        parsed = jobspec.JobSpec.model_validate(spec)
    except ValidationError as e:
        raise Invalid.of(jobspec.pydantic_problems(e, "spec")) from None
    stored = parsed.model_dump(mode="json", exclude_none=True)
    jobspec.check_template(stored, [])
    return stored, parsed


def store(session: Session, team_id: uuid.UUID, name: str, description: str, spec: dict, actor: str):
    # `spec` is the stored (JSON) form: the body validates it back into a JobSpec.
    body = TemplateCreate.model_validate({"name": name, "description": description, "spec": spec})
    return templates.create(session, team_id, body, actor)


def export_job(session: Session, backends: Mapping[str, Backend], team_id: uuid.UUID, job_id: uuid.UUID, fmt: str,
               settings: InteropSettings) -> str:
    job = jobs.get_job(session, team_id, job_id)
    compiled = jobspec.CompiledJob.from_json(job.compiled)
    # The job's backend's view: what it launched, with the defaults it adds (output folder, service account).
    view = jobs.launch_view(backends, job.backend, job.id, compiled, job.backend_ref)
    return render(fmt, view.custom_job, region=settings.vertex_location, project=settings.vertex_project,
                  title=f"trainjobs job {job.id} ({job.display_name}), from template {job.template_name} "
                        f"version {job.template_version}, as its {job.backend} backend launches it")


def export_template(session: Session, team_id: uuid.UUID, name: str, version: int | None,
                    params: list[str], fmt: str, settings: InteropSettings) -> str:
    tv = templates.get_version(session, team_id, name, version)
    values = _typed_values(params, tv.parameters)
    _spec, compiled = jobspec.build(tv.spec, tv.parameters, values, None, display_name=name, labels={})
    given = ", ".join(params) if params else "its parameters' defaults"
    return render(fmt, compiled.custom_job_dict, region=settings.vertex_location, project=settings.vertex_project,
                  title=f"trainjobs template {name} version {tv.version} with {given}, as compiled (a job "
                        "launched on Vertex also gets the backend's defaults: export the job to see them)")


def _typed_values(params: list[str], declared: list[dict]) -> dict[str, Any]:
    """`name=value` query values typed as the template declares them (as `trainjobs jobs submit -p` does)."""
    types = {p.get("name"): p.get("type") for p in declared}
    out: dict[str, Any] = {}
    problems = []
    for item in params:
        key, sep, raw = item.partition("=")
        if not sep:
            problems.append(Problem(f"param.{item}", "not name=value", "write e.g. param=epochs=3"))
            continue
        kind = types.get(key)
        try:
            out[key] = (int(raw) if kind == "int" else float(raw) if kind == "float"
                        else {"true": True, "false": False}[raw.lower()] if kind == "bool" else raw)
        except (ValueError, KeyError):
            problems.append(Problem(f"param.{key}", f"{raw!r} is not a {kind}", f"give a {kind} value"))
    if problems:
        raise Invalid.of(problems)
    return out
