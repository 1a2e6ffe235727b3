"""`trainjobs templates import|export` and `trainjobs jobs export`: AI Platform configs
and gcloud flags in, gcloud commands, config files and Vertex SDK snippets out."""
from __future__ import annotations

import sys
from pathlib import Path

from service.cli.client.common import (
    OK,
    UsageError,
    client_options,
    escape,
    handles_errors,
    key_value,
    make_client,
    print_json,
    stderr_console,
    yaml_text,
)

IMPORT_FORMATS = ("auto", "aiplatform-config", "vertex-config", "gcloud", "worker-pool-specs")
EXPORT_FORMATS = ("gcloud", "config", "sdk")


def add_template_commands(ts) -> None:
    i = client_options(ts.add_parser("import", help="an AI Platform config.yaml, a gcloud ai custom-jobs create "
                                                    "command or --worker-pool-spec values -> a template"))
    i.add_argument("file", type=Path, help="the source; - reads stdin")
    i.add_argument("--format", choices=IMPORT_FORMATS, default="auto",
                   help="auto: gcloud if a line starts with `gcloud `, vertex-config if one starts with "
                        "workerPoolSpecs:, else aiplatform-config; "
                        "worker-pool-specs: one --worker-pool-spec value a line, an empty line an empty pool")
    i.add_argument("--name", help="store the result as this new template (default: only show it)")
    i.add_argument("--description", help="default: where it was imported from")
    i.add_argument("--dry-run", action="store_true", help="convert and validate only, even with --name")
    i.set_defaults(func=import_template)

    e = client_options(ts.add_parser("export", help="a template's CustomJob for gcloud or the Vertex SDK"))
    e.add_argument("name")
    e.add_argument("--format", choices=EXPORT_FORMATS, default="gcloud")
    e.add_argument("--version", type=int, help="default: the latest")
    e.add_argument("-p", "--param", action="append", type=key_value, default=[], metavar="NAME=VALUE",
                   help="a template parameter (repeat); default: the parameters' defaults")
    e.set_defaults(func=export_template)


def add_job_commands(js, job_id) -> None:
    e = client_options(js.add_parser("export", help="a job's CustomJob as launched, for gcloud or the Vertex SDK"))
    e.add_argument("job", type=job_id, help="the job: its id, a unique id prefix or its display name")
    e.add_argument("--format", choices=EXPORT_FORMATS, default="gcloud")
    e.set_defaults(func=export_job)


def read_source(path: Path, fmt: str) -> tuple[str | list[str], str]:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    if fmt == "auto":
        lines = [ln.strip() for ln in text.splitlines()]
        fmt = ("gcloud" if any(ln.startswith("gcloud ") for ln in lines) else
               "vertex-config" if any(ln.startswith("workerPoolSpecs:") for ln in lines) else "aiplatform-config")
    if fmt == "worker-pool-specs":
        lines = [ln.strip() for ln in text.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return lines, fmt
    return text, fmt


@handles_errors
def import_template(args) -> int:
    source, fmt = read_source(args.file, args.format)
    with make_client(args) as client:
        out = client.templates.import_source(source, fmt, name=args.name, description=args.description,
                                             dry_run=args.dry_run)
    if args.output == "json":
        print_json(out)
        return OK
    # A file `trainjobs templates apply -f` takes, like `templates get` prints.
    doc = {"name": args.name or "imported", "description": out.description, "spec": out.spec,
           "parameters": out.parameters}
    print(yaml_text(doc, sort_keys=False, width=100), end="")
    err = stderr_console()
    for w in out.warnings:
        err.print(f"[yellow]warning[/] [bold]{escape(w.field)}[/]: {escape(w.message)}"
                  + (f" [dim]({escape(w.fix)})[/]" if w.fix else ""))
    if out.template is not None:
        err.print(escape(f"template {out.template.name}: created (version {out.template.version})"))
    else:
        err.print("not stored" + (" (dry run)" if args.name else "; pass --name to store it as a template"))
    return OK


@handles_errors
def export_template(args) -> int:
    with make_client(args) as client:
        text = client.templates.export(args.name, args.format, version=args.version,
                                       parameters=dict(args.param) or None)
    return _emit(args, text)


@handles_errors
def export_job(args) -> int:
    with make_client(args) as client:
        text = client.export(args.job, args.format)
    return _emit(args, text)


def _emit(args, text: str) -> int:
    if args.output == "json":
        print_json({"format": args.format, "text": text})
    else:
        sys.stdout.write(text)
    return OK
