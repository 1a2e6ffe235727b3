"""`trainjobs templates apply|list|get|versions`. A template file is YAML or
JSON: {name, description, spec, parameters}, the same shape `templates get` prints."""
from __future__ import annotations

import difflib
from pathlib import Path

from service.cli.client import render
from service.cli.client.common import (
    OK,
    UsageError,
    client_options,
    escape,
    handles_errors,
    load_document,
    make_client,
    print_json,
    stderr_console,
    stdout_console,
    yaml_text,
)

FILE_KEYS = ("name", "description", "spec", "parameters")


def register(sub) -> None:
    t = sub.add_parser("templates", help="job templates: apply from a file, list, get")
    ts = t.add_subparsers(dest="templates_command", required=True, metavar="COMMAND")

    a = client_options(ts.add_parser("apply", help="create a template from a file, or add a version if it changed"))
    a.add_argument("-f", "--file", required=True, type=Path, help="YAML or JSON; - reads stdin")
    a.add_argument("--name", help="the template's name (default: `name` in the file)")
    a.add_argument("--dry-run", action="store_true", help="only show what would change")
    a.set_defaults(func=apply)

    ls = client_options(ts.add_parser("list", help="templates and their latest versions"))
    ls.add_argument("--archived", action="store_true", help="include archived templates")
    ls.set_defaults(func=list_templates)

    g = client_options(ts.add_parser("get", help="a template as a file `templates apply` takes"))
    g.add_argument("name")
    g.add_argument("--version", type=int, help="default: the latest")
    g.set_defaults(func=get)

    v = client_options(ts.add_parser("versions", help="a template's versions"))
    v.add_argument("name")
    v.set_defaults(func=versions)

    from service.cli.client.interop import add_template_commands
    add_template_commands(ts)  # import, export


def read_template_file(path: Path, name: str | None) -> tuple[str, dict]:
    doc = load_document(path)
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a template file is an object with {', '.join(FILE_KEYS)}")
    unknown = sorted(set(doc) - set(FILE_KEYS))
    if unknown:
        raise UsageError(f"{path}: unknown key(s) {', '.join(unknown)}; a template file has {', '.join(FILE_KEYS)}")
    name = name or doc.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"{path}: no `name` (or pass --name)")
    if "spec" not in doc:
        raise UsageError(f"{path}: no `spec`")
    body = {"description": doc.get("description") or "", "spec": doc["spec"],
            "parameters": doc.get("parameters") or []}
    return name, body


def as_stored(client, name: str, body: dict) -> dict:
    """The body as the service stores it (defaults filled in, nulls dropped), so an unchanged
    file compares equal to its stored version: the service says (POST /v1/templates?dry_run=true),
    the CLI knows nothing of its schema. A body that does not validate is sent as written: the
    service's answer names each problem."""
    from trainjobs_client import InvalidRequest
    try:
        return client.templates.preview(name, **body)
    except InvalidRequest:
        return body


def as_yaml(name: str, body: dict) -> str:
    doc = {"name": name, "description": body.get("description", ""), "spec": body.get("spec"),
           "parameters": body.get("parameters") or []}
    return yaml_text(doc, sort_keys=False, width=100)


def _comparable(body: dict) -> str:
    return yaml_text({k: body.get(k) for k in ("description", "spec", "parameters")}, sort_keys=True, width=100)


def diff(name: str, old: dict | None, new: dict, old_label: str, new_label: str) -> str:
    before = _comparable(old).splitlines(keepends=True) if old is not None else []
    after = _comparable(new).splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"{name} ({old_label})", f"{name} ({new_label})"))


def print_diff(text: str) -> None:
    out = stdout_console()
    for line in text.splitlines():
        style = ("green" if line.startswith("+") else "red" if line.startswith("-")
                 else "cyan" if line.startswith("@@") else None)
        out.print(line, style=style, markup=False, highlight=False)


@handles_errors
def apply(args) -> int:
    from trainjobs_client import NotFound
    from trainjobs_client._ops import stored_form
    name, body = read_template_file(args.file, args.name)
    with make_client(args) as client:
        body = as_stored(client, name, body)
        if args.dry_run:
            try:
                current = client.templates.get(name)
            except NotFound:
                current = None
            old = stored_form(current) if current else None
            text = diff(name, old, body, f"version {current.version}" if current else "new", str(args.file))
            action = "create" if current is None else ("update" if text else "none")
            return _report(args, name, action, text, current.version if current else None, None)
        applied = client.templates.apply(name, **body)
    old = stored_form(applied.previous) if applied.previous else None
    new = stored_form(applied.template)
    text = "" if applied.action == "unchanged" else diff(
        name, old, new, f"version {applied.previous.version}" if applied.previous else "new",
        f"version {applied.template.version}")
    return _report(args, name, applied.action, text, applied.previous.version if applied.previous else None,
                   applied.template.version)


def _report(args, name: str, action: str, text: str, before: int | None, after: int | None) -> int:
    if args.output == "json":
        print_json({"name": name, "action": action, "previous_version": before, "version": after, "diff": text})
        return OK
    if text:
        print_diff(text)
    err = stderr_console()
    messages = {"created": f"template {name}: created (version {after})",
                "updated": f"template {name}: version {after} written (was {before})",
                "unchanged": f"template {name}: unchanged (version {after}); nothing written",
                "create": f"template {name}: would be created (dry run)",
                "update": f"template {name}: would become version {(before or 0) + 1} (dry run)",
                "none": f"template {name}: unchanged (version {before}); nothing to do"}
    err.print(escape(messages[action]))
    return OK


@handles_errors
def list_templates(args) -> int:
    with make_client(args) as client:
        found = list(client.templates.list(include_archived=args.archived))
    if args.output == "json":
        print_json(found)
    elif found:
        stdout_console().print(render.templates_table(found))
    else:
        stderr_console().print("no templates")
    return OK


@handles_errors
def get(args) -> int:
    from trainjobs_client._ops import stored_form
    with make_client(args) as client:
        template = client.templates.get(args.name, args.version)
    if args.output == "json":
        print_json(template)
    else:
        archived = ", archived" if template.archived else ""
        print(f"# {template.name} version {template.version} of {template.latest_version}{archived}; "
              f"written by {template.created_by} at {template.created_at:%Y-%m-%d %H:%M:%S}")
        print(as_yaml(template.name, stored_form(template)), end="")
    return OK


@handles_errors
def versions(args) -> int:
    with make_client(args) as client:
        found = client.templates.versions(args.name)
    if args.output == "json":
        print_json(found)
        return OK
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("VERSION", "WRITTEN", "BY", "DESCRIPTION"):
        t.add_column(col)
    for v in found:
        t.add_row(str(v.version), f"{v.created_at:%Y-%m-%d %H:%M:%S}", escape(v.created_by), escape(v.description))
    stdout_console().print(t)
    return OK
