"""`trainjobs teams limits|set-limits|usage`: a team's budgets and its use against them
(estimates; docs/cost.md). The team is the token's unless --team names it."""
from __future__ import annotations

from service.cli.client.common import (
    OK,
    UsageError,
    client_options,
    handles_errors,
    key_value,
    make_client,
    print_json,
    stdout_console,
)


def register(sub) -> None:
    t = sub.add_parser("teams", help="team limits (concurrent jobs, accelerators, monthly spend) and use")
    ts = t.add_subparsers(dest="teams_command", required=True)
    g = _team(client_options(ts.add_parser("limits", help="the team's limits")))
    g.set_defaults(func=show_limits)
    s = _team(client_options(ts.add_parser("set-limits", help="replace the team's limits (admin); "
                                                                 "a limit not given is no limit")))
    s.add_argument("--max-jobs", type=int, help="concurrent jobs")
    s.add_argument("--max-accelerators", action="append", default=[], metavar="TYPE=N", type=key_value,
                   help="e.g. NVIDIA_TESLA_T4=8; repeat for several types")
    s.add_argument("--max-monthly-spend", help="estimated spend per calendar month, e.g. 2500.00")
    s.add_argument("--on-exceed", choices=["refuse", "queue"], default="refuse",
                   help="refuse the job (409), or let it wait in QUEUED until use drops")
    s.set_defaults(func=set_limits)
    u = _team(client_options(ts.add_parser("usage", help="the team's use against its limits")))
    u.set_defaults(func=usage)


def _team(p):
    p.add_argument("--team", help="default: your token's team")
    return p


def _team_of(args, client) -> str:
    return args.team or client.whoami().team


def _print_limits(args, limits) -> int:
    if args.output == "json":
        print_json(limits)
        return OK
    out = stdout_console()
    out.print(f"team {limits.team} (on_exceed: {limits.on_exceed})", markup=False)
    out.print(f"  max_concurrent_jobs  {limits.max_concurrent_jobs if limits.max_concurrent_jobs is not None else '-'}",
              markup=False)
    for kind, n in sorted(limits.max_accelerators.items()):
        out.print(f"  max_accelerators     {kind}={n}", markup=False)
    spend = f"{limits.max_monthly_spend} {limits.currency}" if limits.max_monthly_spend is not None else "-"
    out.print(f"  max_monthly_spend    {spend}", markup=False)
    return OK


@handles_errors
def show_limits(args) -> int:
    with make_client(args) as client:
        return _print_limits(args, client.team_limits(_team_of(args, client)))


@handles_errors
def set_limits(args) -> int:
    accelerators = {}
    for kind, n in args.max_accelerators:
        if not n.isdigit():
            raise UsageError(f"--max-accelerators {kind}={n}: TYPE=N with N a whole number, e.g. NVIDIA_TESLA_T4=8")
        accelerators[kind] = int(n)
    with make_client(args) as client:
        limits = client.set_team_limits(_team_of(args, client), max_concurrent_jobs=args.max_jobs,
                                        max_accelerators=accelerators, max_monthly_spend=args.max_monthly_spend,
                                        on_exceed=args.on_exceed)
    return _print_limits(args, limits)


@handles_errors
def usage(args) -> int:
    with make_client(args) as client:
        use = client.team_usage(_team_of(args, client))
    if args.output == "json":
        print_json(use)
        return OK
    out = stdout_console()
    out.print(f"team {use.team} at {use.at:%Y-%m-%d %H:%M} UTC (estimates, {use.currency})", markup=False)
    for line in use.limits:
        out.print(f"  {line.limit:<40} {line.use} of {line.max if line.max is not None else 'no limit'}",
                  markup=False)
    out.print(use.note, markup=False)
    return OK
