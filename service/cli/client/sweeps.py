"""`trainjobs sweeps create|list|get|wait|resume|cancel`."""
from __future__ import annotations

from pathlib import Path

from service.cli.client import render
from service.cli.client.common import (
    OK,
    UsageError,
    client_options,
    escape,
    exit_for,
    handles_errors,
    load_document,
    make_client,
    print_json,
    reference,
    stderr_console,
    stdout_console,
)
from service.core.text import plural

STATES = ["RUNNING", "CANCELLING", "SUCCEEDED", "FAILED", "CANCELLED"]


def register(sub) -> None:
    sweeps = sub.add_parser("sweeps", help="hyperparameter sweeps: one job per trial (talks to the service's API)")
    ss = sweeps.add_subparsers(dest="sweeps_command", required=True, metavar="COMMAND")

    c = client_options(ss.add_parser("create", help="start a sweep described in a YAML or JSON file"))
    c.add_argument("file", type=Path, help="the body of POST /v1/sweeps (see the README, Sweeps); - reads stdin")
    c.add_argument("--dry-run", action="store_true", help="check every trial and show them; start nothing")
    c.add_argument("--wait", action="store_true", help="wait for the end; the exit code tells the final state")
    c.add_argument("--timeout", type=float, metavar="SECONDS", help="with --wait: give up after this long (exit 124)")
    c.add_argument("-q", "--quiet", action="store_true", help="print only the sweep id")
    c.set_defaults(func=create)

    ls = client_options(ss.add_parser("list", help="sweeps, newest first"))
    ls.add_argument("--state", action="append", choices=STATES, default=[], help="repeat for several")
    ls.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    ls.set_defaults(func=list_sweeps)

    g = client_options(ss.add_parser("get", help="a sweep: state, counts, trials ranked by the objective"))
    g.add_argument("sweep", type=reference, help="the sweep: its id, a unique id prefix or its display name")
    g.set_defaults(func=get)

    w = client_options(ss.add_parser("wait", help="wait until every trial has ended"))
    w.add_argument("sweep", type=reference, help="the sweep: its id, a unique id prefix or its display name")
    w.add_argument("--timeout", type=float, metavar="SECONDS")
    w.set_defaults(func=wait)

    r = client_options(ss.add_parser("resume", help="resume a PAUSED sweep (its creator's token was revoked); "
                                                    "its further trials run as you"))
    r.add_argument("sweep", type=reference, help="the sweep: its id, a unique id prefix or its display name")
    r.set_defaults(func=resume)

    x = client_options(ss.add_parser("cancel", help="cancel a sweep: no more trials, unfinished ones cancelled"))
    x.add_argument("sweep", type=reference, help="the sweep: its id, a unique id prefix or its display name")
    x.add_argument("--wait", action="store_true", help="wait until its trials have stopped")
    x.set_defaults(func=cancel)


def _value(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def sweep_detail(sweep):
    from rich.console import Group
    from rich.table import Table
    info = Table.grid(padding=(0, 2))
    info.add_column(style="bold")
    info.add_column()
    counts = ", ".join(f"{n} {s}" for s, n in sorted(sweep.counts.items()))
    for key, value in (("id", str(sweep.id)), ("name", escape(sweep.display_name)),
                       ("template", escape(f"{sweep.template.name}:v{sweep.template.version}")),
                       ("state", render.state(sweep.state) + (f" ({escape(sweep.state_reason)})"
                                                              if getattr(sweep, "state_reason", None) else "")),
                       ("search", f"{sweep.algorithm}"
                                                              + (f", seed {sweep.seed}" if sweep.seed is not None else "")),
                       ("objective", escape(f"{sweep.objective.goal} {sweep.objective.metric}")),
                       ("trials", f"{sweep.trial_count} ({counts}), at most {sweep.max_parallel} at once")):
        info.add_row(key, value)
    trials = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("TRIAL", "STATE", "OBJECTIVE", "EPOCH", "LAST", "PARAMETERS", "JOB"):
        trials.add_column(col, no_wrap=col != "PARAMETERS")
    for t in sweep.trials:
        params = " ".join(f"{k}={v}" for k, v in t.parameters.items())
        trials.add_row(str(t.number), render.state(t.state), _value(t.objective_value),
                       "-" if t.objective_epoch is None else str(t.objective_epoch), _value(t.last_value),
                       escape(params), str(t.job_id) if t.job_id else escape(t.error or "-"))
    return Group(info, "", trials)


def sweeps_table(sweeps):
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False)
    t.add_column("ID", no_wrap=True, min_width=36)
    for col in ("NAME", "TEMPLATE", "STATE", "TRIALS", "BEST", "AGE"):
        t.add_column(col, no_wrap=col in ("STATE", "AGE"))
    for s in sweeps:
        done = sum(n for state, n in s.counts.items() if state in ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"))
        best = f"#{s.best.number} {_value(s.best.objective_value)}" if s.best else "-"
        t.add_row(str(s.id), escape(s.display_name), escape(f"{s.template.name}:v{s.template.version}"),
                  render.state(s.state), f"{done}/{s.trial_count}", best, render.age(s.created_at))
    return t


def _show(sweep, args) -> None:
    if args.output == "json":
        print_json(sweep)
    else:
        stdout_console().print(sweep_detail(sweep))


@handles_errors
def create(args) -> int:
    body = load_document(args.file)
    if not isinstance(body, dict):
        raise UsageError(f"{args.file}: a sweep is a JSON/YAML object (the body of POST /v1/sweeps)")
    with make_client(args) as client:
        sweep = client.sweeps.create(body, dry_run=args.dry_run)
        if args.dry_run:
            _show(sweep, args)
            return OK
        if args.quiet:
            print(sweep.id, flush=True)
        elif args.output == "text":
            stderr_console().print(f"started sweep [bold]{sweep.id}[/] ({escape(sweep.display_name)}): "
                                   f"{plural(sweep.trial_count, 'trial')}, at most {sweep.max_parallel} at once")
        if not args.wait:
            if args.output == "json" and not args.quiet:
                print_json(sweep)
            return OK
        final = client.sweeps.wait(sweep, args.timeout)
    if not args.quiet:
        _show(final, args)
    return exit_for(final.state)


@handles_errors
def list_sweeps(args) -> int:
    import itertools
    with make_client(args) as client:
        found = list(itertools.islice(client.sweeps.list(state=args.state, page_size=min(max(args.limit, 1), 100)),
                                      args.limit))
    if args.output == "json":
        print_json(found)
    elif found:
        stdout_console().print(sweeps_table(found))
    else:
        stderr_console().print("no sweeps")
    return OK


@handles_errors
def get(args) -> int:
    with make_client(args) as client:
        _show(client.sweeps.get(args.sweep), args)
    return OK


@handles_errors
def wait(args) -> int:
    with make_client(args) as client:
        final = client.sweeps.wait(args.sweep, args.timeout)
    _show(final, args)
    return exit_for(final.state)


@handles_errors
def resume(args) -> int:
    with make_client(args) as client:
        sweep = client.sweeps.resume(args.sweep)
    if args.output == "json":
        print_json(sweep)
    else:
        stderr_console().print(f"sweep [bold]{sweep.id}[/] {render.state(sweep.state)}")
    return OK


@handles_errors
def cancel(args) -> int:
    with make_client(args) as client:
        sweep = client.sweeps.cancel(args.sweep)
        if args.wait:
            sweep = client.sweeps.wait(sweep)
    if args.output == "json":
        print_json(sweep)
    else:
        stderr_console().print(f"sweep [bold]{sweep.id}[/] {render.state(sweep.state)}")
    return OK
