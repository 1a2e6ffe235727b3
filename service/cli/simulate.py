"""`trainjobs queue simulate --days N --proposal FILE [--backend B] [--json]`: the last N days of a
backend's jobs replayed under today's capacity and shares and under a proposal (the operator API's
own JSON), each team's p50 and p90 wait beside what happened (service/capacity/whatif.py,
docs/queue.md "What if").

A local operator command, like `tokens`: it reads the database itself (TRAINJOBS_DATABASE_URL),
not the API. It reads every team's history, which only whoever holds the database may; it offers
nothing new over HTTP to attack; and its CPU (seconds to minutes) is spent in this process, never in
an API process that serves members."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # the replay loads the server stack (SQLAlchemy): client commands must not
    from service.capacity.whatif_replay import World


def register(queue: argparse.ArgumentParser) -> None:
    """`simulate` under `trainjobs queue` (whose own arguments show the queue over the API)."""
    sub = queue.add_subparsers(dest="queue_command", metavar="simulate")
    p = sub.add_parser("simulate", help="what if: replay the last days' jobs under a proposed capacity and shares "
                                        "(local operator command: reads the database)")
    p.add_argument("--days", type=int, required=True, help="replay the jobs submitted in the last N days")
    p.add_argument("--proposal", type=Path, required=True,
                   help='JSON: {"capacity": {"resources": {...}}, "shares": {"TEAM": {...} or null}}, the bodies of '
                        "PUT /v1/capacity/{backend} and PUT /v1/teams/{team}/shares/{backend}")
    p.add_argument("--backend", help="the backend (default: TRAINJOBS_DEFAULT_BACKEND)")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from service.capacity import whatif
    from service.capacity.queue_cache import launch_slots
    from service.capacity.whatif_settings import SimulateEnv
    from service.cli.startup import settings_or_refuse
    from service.core.clock import utcnow
    from service.core.errors import DomainError
    from service.persistence import local_db
    from service.persistence.session import make_engine, make_session_factory
    from service.slices import capacity_settings, make_backends

    settings, env = settings_or_refuse(), settings_or_refuse(SimulateEnv)
    limits = whatif.Limits(env.simulate_max_days, env.simulate_max_jobs, env.simulate_max_seconds)
    backend = args.backend or settings.default_backend
    if backend not in settings.backends:
        return _refuse(f"no backend {backend!r} is enabled here; enabled: {', '.join(settings.backends)}")
    try:
        proposal = whatif.parse(_read(args.proposal, settings.max_body_bytes))
    except (OSError, DomainError) as e:
        return _refuse(f"{args.proposal}: {_said(e)}")
    if not local_db.check(settings.database_url):
        return 2
    capacity = capacity_settings(settings)
    engine = make_engine(settings.database_url)
    until = utcnow()
    try:
        with make_session_factory(engine)() as session:
            today, history, teams = whatif.load(session, backend, args.days, until, capacity, limits,
                                                launch_slots(make_backends(settings), backend))
        proposed = whatif.propose(today, proposal, teams, capacity.max_resources)
        report = whatif.compare(backend, history, today, proposed, until - timedelta(days=args.days), until, capacity, limits)
    except DomainError as e:
        return _refuse(_said(e))
    finally:
        engine.dispose()
    if args.output == "json":
        print(json.dumps(asdict(report), default=str, indent=2))
    else:
        print("\n".join(render(report)))
    return 0


def _read(path: Path, most: int) -> bytes:
    """The file, refused past the API's own body limit (TRAINJOBS_MAX_BODY_BYTES) as the API would."""
    with path.open("rb") as f:
        data = f.read(most + 1)
    if len(data) > most:
        raise OSError(f"larger than {most} bytes (TRAINJOBS_MAX_BODY_BYTES, the API's limit on a body)")
    return data


def _said(e: Exception) -> str:
    problems = getattr(e, "problems", None)
    if not problems:
        return str(getattr(e, "detail", e))
    return "not valid:\n" + "\n".join(f"  {p.field}: {p.message}" + (f" ({p.fix})" if p.fix else "") for p in problems)


def _refuse(why: str) -> int:
    print(f"trainjobs: {why}", file=sys.stderr)
    return 2


def render(report) -> list[str]:
    """The report as text: what was replayed, under what, then one line per team."""
    from service.ui.render_format import seconds as _s  # the UI's way of writing a length of time

    head = [f"backend {report.backend}: {report.jobs} jobs submitted {report.since:%Y-%m-%d %H:%M} to "
            f"{report.until:%Y-%m-%d %H:%M} UTC replayed in {report.cpu_seconds:.1f} CPU s "
            f"({report.never_started} never started, left out; {report.still_running} still running, with their "
            "run time so far)",
            f"  today:    {_world(report.today)}", f"  proposed: {_world(report.proposed)}", ""]
    rows = [("TEAM", "JOBS", "HAPPENED p50", "p90", "TODAY p50", "p90", "PROPOSED p50", "p90", "NEVER STARTS")]
    for t in report.teams:
        rows.append((t.team, str(t.jobs), _s(t.happened.p50_s), _s(t.happened.p90_s), _s(t.today.p50_s),
                     _s(t.today.p90_s), _s(t.proposed.p50_s), _s(t.proposed.p90_s),
                     f"{t.today.not_started} -> {t.proposed.not_started}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    foot = ["", "HAPPENED: what the jobs really waited; TODAY: the replay under today's capacity and shares (compare "
            "PROPOSED with this); waits from submit to first start, nearest rank"]
    return head + lines + foot


def _world(world: World) -> str:
    cap = ", ".join(f"{n} {r}" for r, n in sorted(world.capacity.items())) or "none (nothing arbitrated)"
    slots = "" if world.slots is None else f", {world.slots} launch slots"
    shares = "; ".join(f"{team} nominal {dict(s.nominal) or '-'} weight {s.weight:g}"
                       for team, s in sorted(world.shares.items())) or "no shares"
    return f"capacity {cap}{slots}; {shares}"

