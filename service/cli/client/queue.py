"""`trainjobs queue [--backend NAME] [--json] [--explain]`: each backend's capacity, each team's use
of it, and the waiting jobs in the order the controller would start them, with why, when each will
likely start and when at the latest (GET /v1/queue; docs/queue.md). `--explain`: each waiting
job's priority in parts instead, like Slurm's sprio (the tier, the team's fair share, the class,
the age, the size, and the part that put the job ahead of it there). Another team's waiting jobs
show only their team, place, priority, demand, and the parts those say: that is all the service tells."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.cli.client.common import OK, client_options, escape, handles_errors, make_client, print_json, stdout_console
from service.cli.client.render import duration

SOURCE = {"api": "set through the API", "settings": "TRAINJOBS_CAPACITY", "none": "none set: nothing arbitrated"}


def register(sub) -> None:
    p = client_options(sub.add_parser("queue", help="capacity, use per team and the waiting jobs in order, with why"))
    p.add_argument("--backend", help="one backend (default: every enabled one)")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    p.add_argument("--limit", type=int, default=100, help="waiting jobs shown per backend (1-1000; default 100)")
    p.add_argument("--explain", action="store_true",
                   help="each waiting job's priority in parts (like sprio): tier, fair share, class, age, size, "
                        "and what put the job ahead of it there")
    p.set_defaults(func=show)


@handles_errors
def show(args) -> int:
    with make_client(args) as client:
        queues = client.queue(args.backend, limit=args.limit)
    if args.output == "json":
        print_json({"items": queues})
        return OK
    out = stdout_console()
    for i, q in enumerate(queues):
        if i:
            out.print()
        for part in render(q, explain=args.explain):
            out.print(part)
    return OK


def amounts(values: dict[str, int], zeros: bool = False) -> str:
    """{"core": 2, "gpu:NVIDIA_TESLA_A100": 1} -> "2 core, 1 gpu:NVIDIA_TESLA_A100"; "-" for none."""
    return ", ".join(f"{n} {r}" for r, n in sorted(values.items()) if n or zeros) or "-"


def when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    minutes = max(0, int((at - now).total_seconds() // 60))
    return f"{at.astimezone(UTC):%H:%M} UTC" + (f" (in {minutes // 60}h{minutes % 60:02d}m)" if minutes else " (now)")


def render(q, explain: bool = False) -> list:
    """The lines and tables of one backend (rich renderables; every text from the service escaped).
    explain: the waiting jobs' priority in parts instead of their starts and why."""
    from rich.table import Table
    head = (f"[bold]backend {escape(q.backend)}[/]: capacity {escape(amounts(q.capacity))} "
            f"({SOURCE.get(q.capacity_source, escape(q.capacity_source))}); "
            f"in use {escape(amounts({r: q.in_use.get(r, 0) for r in q.capacity}, zeros=True))}; "
            f"free {escape(amounts(q.free, zeros=True))}")
    counts = (f"  {q.running_jobs} running, {q.waiting_jobs} waiting ({q.starting_jobs} about to start)"
              f"{', more than the scheduler reads in a pass' if q.waiting_truncated else ''}; "
              f"as of {q.computed_at.astimezone(UTC):%H:%M:%S} UTC")
    teams = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("TEAM", "NOMINAL", "USE", "BORROWED", "WEIGHT", "RUNNING", "WAITING"):
        teams.add_column(col)
    for t in q.teams:
        teams.add_row(escape(t.team), escape(amounts(t.nominal)), escape(amounts(t.use)), escape(amounts(t.borrowed)),
                      f"{t.weight:g}", str(t.running_jobs), str(t.waiting_jobs))
    waiting = explained(q) if explain else starts(q)
    parts: list = [head, counts]
    if q.teams:
        parts += ["", teams]
    parts += ["", waiting if q.waiting else "  no job waits"]
    if q.next_offset is not None:
        parts.append(f"  ... {q.waiting_jobs - len(q.waiting)} more waiting (--limit, or --json for all fields)")
    return parts


def _job(e) -> str:
    return f"{escape(e.display_name or '')} ({str(e.id)[:8]})" if e.id is not None else "[dim](another team's job)[/]"


def starts(q):
    """The waiting jobs with their starts and why."""
    from rich.table import Table
    waiting = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("POS", "TEAM", "JOB", "PRIO", "DEMAND", "LIKELY", "AT THE LATEST", "WHY"):
        waiting.add_column(col, no_wrap=col in ("POS", "PRIO"))
    now = q.computed_at
    for e in q.waiting:
        waiting.add_row(str(e.position), escape(e.team), _job(e), str(e.priority), escape(amounts(e.demand)),
                        when(e.likely_start, now), when(e.estimated_start, now), escape(e.why or ""))
    return waiting


# What put the job ahead of a job there (GET /v1/queue's factors.decided_by), in words.
DECIDED = {"tier": "its tier", "fair_share": "its team's fair share", "turn": "its team's turn",
           "priority": "its priority", "age": "its age (older)", "forecast": "the forecast (it starts first)"}


def waited(seconds: float | None, now: datetime) -> str:
    """How long a job waited ('1h02m', '3m05s', '12s'), as long as the job list says a run took."""
    return "-" if seconds is None else duration(now - timedelta(seconds=seconds), now)


def explained(q):
    """The waiting jobs' priority in parts, like Slurm's sprio: the scheduler orders by tier, then in
    it by fair share between teams and by priority then age within a team (no weighted sum)."""
    from rich.table import Table
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("POS", "TEAM", "JOB", "TIER", "FAIRSHARE", "CLASS", "AGE", "SIZE", "DECIDED BY"):
        table.add_column(col, no_wrap=col not in ("JOB", "FAIRSHARE", "DECIDED BY"))
    for e in q.waiting:
        f = e.factors
        if f is None:
            table.add_row(str(e.position), escape(e.team), _job(e), *["-"] * 6)
            continue
        s = f.fair_share
        past = "" if s.usage is None else f", past use {s.usage:.2f}"
        fair = f"#{s.rank} (borrowed {s.borrowed:.2f}, held {s.held:.2f}, weight {s.weight:g}{past})"
        klass = f"{escape(f.priority_class)} ({f.priority})" if f.priority_class else str(f.priority)
        decided = "-" if f.decided_by is None else DECIDED.get(f.decided_by, escape(f.decided_by))
        table.add_row(str(e.position), escape(e.team), _job(e), escape(f.tier or "-"), fair, klass,
                      waited(f.waited_seconds, q.computed_at), f"{f.size:.2f}", decided)
    return table
