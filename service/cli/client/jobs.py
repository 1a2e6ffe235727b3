"""`trainjobs jobs submit|relaunch|list|get|events|logs|wait|cancel`."""
from __future__ import annotations

import argparse
from pathlib import Path

from service.cli.client import render
from service.cli.client.common import (
    OK,
    UsageError,
    client_options,
    escape,
    exit_for,
    handles_errors,
    json_or_text,
    key_value,
    load_document,
    make_client,
    print_json,
    reference,
    screen_width,
    set_path,
    since_time,
    stderr_console,
    stdout_console,
)
from service.cli.client.follow import follow_logs

JOB_HELP = "the job: its id, a unique id prefix (e.g. 3f2a) or its display name"
STATES = ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED", "PAUSED", "EXPIRED",
          "UPDATING", "PARTIALLY_SUCCEEDED"]


def register(sub) -> None:
    jobs = sub.add_parser("jobs", help="submit, list, follow and cancel jobs (talks to the service's API)")
    js = jobs.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")

    s = client_options(js.add_parser("submit", help="launch a job from a template"))
    s.add_argument("template")
    _launch_options(s, "the spec", "default: the latest version", "default: <template>-<short id>",
                    "local or vertex (default: the service's default)")
    s.add_argument("--template-version", type=int, metavar="N", help="default: the latest version")
    s.add_argument("--dry-run", action="store_true", help="show the CustomJob and replicas; launch nothing")
    s.set_defaults(func=submit)

    r = client_options(js.add_parser("relaunch", help="launch a job again: its template version, parameters, "
                                                      "overrides, backend and labels, with your changes"))
    r.add_argument("job", type=reference, help=JOB_HELP)
    _launch_options(r, "the job's own overrides", "", "default: the job's", "default: the job's")
    r.add_argument("--template-version", type=_version, metavar="N|latest",
                   help="default: the version the job used; latest: the template's newest")
    r.set_defaults(func=relaunch)

    ls = client_options(js.add_parser("list", help="jobs, newest first (fits the terminal; -o wide: every column)"),
                        wide=True)
    ls.add_argument("--state", action="append", choices=STATES, default=[], help="repeat for several")
    ls.add_argument("--template")
    ls.add_argument("--label", action="append", default=[], metavar="KEY[=VALUE]")
    ls.add_argument("--since", type=since_time, metavar="AGE", help="created in the last 30m, 2h, 7d, ... or after "
                                                                    "an RFC 3339 time")
    ls.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    ls.add_argument("--all", action="store_true", help="every matching job (pages through them)")
    ls.set_defaults(func=list_jobs)

    for name, fn, help_ in (("get", get, "a job: state, progress, error, replicas"),
                            ("events", events, "a job's state history")):
        p = client_options(js.add_parser(name, help=help_))
        p.add_argument("job", type=reference, help=JOB_HELP)
        p.set_defaults(func=fn)

    lg = client_options(js.add_parser("logs", help="a job's logs, one line per log line with the replica first"))
    lg.add_argument("job", type=reference, help=JOB_HELP)
    lg.add_argument("-f", "--follow", action="store_true", help="stream until the job ends")
    lg.add_argument("--replica", help="only this replica, e.g. workerpool1-0")
    lg.add_argument("--since", metavar="CURSOR", help="after this cursor (from -o json output)")
    lg.set_defaults(func=logs)

    w = client_options(js.add_parser("wait", help="wait until a job ends; the exit code tells the final state"))
    w.add_argument("job", type=reference, help=JOB_HELP)
    w.add_argument("--timeout", type=float, metavar="SECONDS")
    w.set_defaults(func=wait)

    c = client_options(js.add_parser("cancel", help="cancel a job"))
    c.add_argument("job", type=reference, help=JOB_HELP)
    c.add_argument("--wait", action="store_true", help="wait until it has stopped")
    c.set_defaults(func=cancel)

    from service.cli.client.interop import add_job_commands
    add_job_commands(js, reference)  # export


def _launch_options(p, patched: str, _version_help: str, name_help: str, backend_help: str) -> None:
    """The options submit and relaunch share."""
    p.add_argument("-p", "--param", action="append", type=key_value, default=[], metavar="NAME=VALUE",
                   help="a template parameter (repeat); typed as the template declares it")
    p.add_argument("--set", action="append", type=key_value, default=[], metavar="PATH=VALUE", dest="sets",
                   help=f"override {patched}, e.g. workers.replica_count=4 or evaluator=null (repeat); "
                        "VALUE is JSON if it parses, else text")
    p.add_argument("--overrides", type=Path, metavar="FILE", help=f"a JSON or YAML merge patch over {patched}")
    p.add_argument("--backend", help=backend_help)
    p.add_argument("--name", help=f"display name ({name_help})")
    p.add_argument("--label", action="append", type=key_value, default=[], metavar="KEY=VALUE")
    p.add_argument("--idempotency-key", metavar="KEY",
                   help="retry-safe: the same key returns the same job (default: a fresh key)")
    p.add_argument("--wait", action="store_true", help="wait for the end; the exit code tells the final state")
    p.add_argument("-f", "--follow", action="store_true", help="print the logs until the end (implies --wait)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="with --wait: give up after this long (exit 124)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the job id")


def _version(text: str) -> int | str:
    if text == "latest":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a version number or 'latest'") from None


def _typed(value: str, kind: str | None):
    """A -p value as the template declares its parameter; undeclared ones as JSON or text
    (the service then names what is wrong)."""
    if kind == "string":
        return value
    if kind == "bool" and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            return value
    if kind == "float":
        try:
            return float(value)
        except ValueError:
            return value
    return json_or_text(value)


def _parameters(client, args, template: str, version: int | None) -> dict:
    if not args.param:
        return {}
    from trainjobs_client import NotFound
    try:
        declared = {p.get("name"): p.get("type") for p in client.templates.get(template, version).parameters}
    except NotFound:
        declared = {}  # the submit itself says the template does not exist
    return {name: _typed(value, declared.get(name)) for name, value in args.param}


def _overrides(args):
    patch = None
    if args.overrides:
        patch = load_document(args.overrides)
        if not isinstance(patch, dict):
            raise UsageError(f"{args.overrides}: a merge patch is a JSON/YAML object")
    for path, value in args.sets:
        patch = patch if patch is not None else {}
        set_path(patch, path, json_or_text(value))
    return patch


@handles_errors
def submit(args) -> int:
    with make_client(args) as client:
        kwargs = dict(parameters=_parameters(client, args, args.template, args.template_version),
                      overrides=_overrides(args), backend=args.backend,
                      display_name=args.name, labels=dict(args.label) or None,
                      template_version=args.template_version)
        if args.dry_run:
            preview = client.preview(args.template, **kwargs)
            if args.output == "json":
                print_json(preview)
            else:
                out = stdout_console()
                out.print(f"[bold]dry run[/]: would launch {escape(preview.display_name)} from "
                          f"{preview.template.name} v{preview.template.version} on {preview.backend}")
                out.print(render.cluster_table(preview.cluster))
            return OK
        job = client.submit(args.template, **kwargs, idempotency_key=args.idempotency_key or True)
        return _launched(client, job, args, "submitted")


@handles_errors
def relaunch(args) -> int:
    with make_client(args) as client:
        params = {}
        if args.param:
            earlier = client.get(args.job)
            version = None if args.template_version == "latest" else (args.template_version or
                                                                      earlier.template.version)
            params = _parameters(client, args, earlier.template.name, version)
        job = client.relaunch(args.job, parameters=params or None, overrides=_overrides(args),
                              backend=args.backend, display_name=args.name, labels=dict(args.label) or None,
                              template_version=args.template_version,
                              idempotency_key=args.idempotency_key or True)
        return _launched(client, job, args, f"relaunched {args.job} as")


def _launched(client, job, args, what: str) -> int:
    """Say what was launched; with --wait or --follow, follow it to the end."""
    err = stderr_console()
    if args.quiet:
        print(job.id, flush=True)
    elif args.output == "json" and not (args.wait or args.follow):
        print_json(job)
    elif args.output == "text":
        err.print(f"{what} job [bold]{job.id}[/] ({escape(job.display_name)}) on {job.backend}: "
                  f"{render.state(job.state)}")
    if not (args.wait or args.follow):
        return OK
    if args.follow:
        follow_logs(client, job, output="json" if args.output == "json" else "text", label=job.display_name,
                    url=args.url)
    return _finished(client.wait(job, args.timeout, on_reconnect=_note), args, err)


def _note(text: str) -> None:
    """A reconnection notice ("reconnecting…") of a follower, on stderr."""
    stderr_console().print(f"[yellow]trainjobs: {escape(text)}[/]")


def _finished(job, args, err) -> int:
    if args.output == "json":
        print_json(job, compact=bool(getattr(args, "follow", False)))
    else:
        note = f": {escape(str(job.error.get('message') or job.error))}" if job.error else ""
        err.print(f"job [bold]{job.id}[/] {render.state(job.state)}{note}")
    return exit_for(job.state)


@handles_errors
def list_jobs(args) -> int:
    import itertools
    with make_client(args) as client:
        found = client.list(state=args.state, template=args.template, labels=args.label, created_after=args.since,
                            page_size=min(max(args.limit, 1), 200) if not args.all else 200)
        jobs = list(found if args.all else itertools.islice(found, args.limit))
    if args.output == "json":
        print_json(jobs)
    elif jobs and args.output == "wide":
        stdout_console().print(render.jobs_table(jobs))
    elif jobs:
        stdout_console().print(render.jobs_compact(jobs, screen_width()), crop=False)
    else:
        stderr_console().print("no jobs")
    return OK


@handles_errors
def get(args) -> int:
    with make_client(args) as client:
        job = client.get(args.job)
    if args.output == "json":
        print_json(job)
    else:
        stdout_console().print(render.job_detail(job))
    return OK


@handles_errors
def events(args) -> int:
    with make_client(args) as client:
        found = client.events(args.job)
    if args.output == "json":
        print_json(found)
    else:
        stdout_console().print(render.events_table(found))
    return OK


@handles_errors
def logs(args) -> int:
    with make_client(args) as client:
        if args.follow:
            end = follow_logs(client, args.job, output=args.output, replica=args.replica, since=args.since,
                              url=args.url)
            if end is not None and args.output == "text":
                stderr_console().print(f"job ended {render.state(end.state)}")
            return OK
        for line in client.logs(args.job, replica=args.replica, since=args.since):
            if args.output == "json":
                print_json(line, compact=True)
            else:
                print(render.log_line(line), flush=True)
    return OK


@handles_errors
def wait(args) -> int:
    with make_client(args) as client:
        return _finished(client.wait(args.job, args.timeout, on_reconnect=_note), args, stderr_console())


@handles_errors
def cancel(args) -> int:
    with make_client(args) as client:
        job = client.cancel(args.job)
        if args.wait:
            job = client.wait(job, on_reconnect=_note)
    if args.output == "json":
        print_json(job)
    else:
        stderr_console().print(f"job [bold]{job.id}[/] {render.state(job.state)}")
    return OK
