"""The Queue page's usage section: each team's decayed use (what fair share reads, every member
sees it) as bars, and the caller's own team's use by day over the last two weeks, as inline SVG
drawn on the server (no script, no chart library), from GET /v1/usage's own computation."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from markupsafe import Markup, escape

from service.auth.service import Actor
from service.core.clock import utcnow
from service.ui.charts import fmt
from service.usage import service
from service.usage.schemas import UsageReport

if TYPE_CHECKING:   # the UI runs no query itself (a contract): the session is passed through
    from sqlalchemy.orm import Session

W, ROW, LEFT, RIGHT = 600, 26, 130, 150
DAYS = 14
TEAMS = 12          # the teams with the most decayed use shown as bars


@dataclass(frozen=True)
class UsageSection:
    report: UsageReport
    teams: Markup       # bars per team
    days: Markup        # the caller's team, by day


def section(session: Session, actor: Actor, backends: set[str]) -> UsageSection:
    caller = service.Caller(actor.team_id, actor.team, actor.can("operator"))
    report = service.report(session, caller, service.Query(hours=DAYS * 24, step="day", limit=TEAMS), backends)
    return UsageSection(report, _team_bars(report), _day_bars(report, actor.team, utcnow()))


def _team_bars(report: UsageReport) -> Markup:
    teams = [t for t in report.teams if t.units > 0]
    if not teams:
        return Markup('<p class="muted">No use recorded yet.</p>')
    top = max(t.units for t in teams)
    h = ROW * len(teams) + 8
    out = [f'<svg class="chart" viewBox="0 0 {W} {h}" role="img" aria-labelledby="usage-teams-title">'
           f'<title id="usage-teams-title">Decayed use per team: '
           f'{escape(", ".join(f"{t.team} {fmt(t.units)}" for t in teams))}</title>']
    for i, t in enumerate(teams):
        y, width = 4 + i * ROW, max(1.0, t.units / top * (W - LEFT - RIGHT))
        out.append(f'<text class="tick" x="{LEFT - 8}" y="{y + 17}" text-anchor="end">{escape(t.team)}</text>'
                   f'<rect class="pt s0" data-team="{escape(t.team)}" x="{LEFT}" y="{y + 3}" width="{width:.1f}" '
                   f'height="{ROW - 8}"><title>{escape(t.team)}: {fmt(t.units)} units</title></rect>'
                   f'<text class="tick" x="{LEFT + width + 6:.1f}" y="{y + 17}">{fmt(t.units)} '
                   f'({t.share * 100:.0f}%)</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _day_bars(report: UsageReport, team: str, now: datetime) -> Markup:
    mine = next((t for t in report.teams if t.team == team), None)
    per_day: dict[str, float] = {}
    for s in (mine.series or []) if mine else []:
        for p in s.points:
            key = p.at.strftime("%m-%d")
            per_day[key] = per_day.get(key, 0.0) + p.units
    days = [(now - timedelta(days=DAYS - 1 - i)).strftime("%m-%d") for i in range(DAYS)]
    top = max(per_day.values(), default=0.0)
    if top <= 0:
        return Markup(f'<p class="muted">Team {escape(team)} used nothing in the last {DAYS} days.</p>')
    h, base, step = 180, 150, (W - 40) / DAYS
    out = [f'<svg class="chart" viewBox="0 0 {W} {h}" role="img" aria-labelledby="usage-days-title">'
           f'<title id="usage-days-title">Team {escape(team)}: units used per day, the last {DAYS} days</title>'
           f'<line class="axis" x1="20" x2="{W - 20}" y1="{base}" y2="{base}"/>']
    for i, day in enumerate(days):
        units = per_day.get(day, 0.0)
        height, x = units / top * (base - 20), 20 + i * step
        out.append(f'<rect class="pt s1" data-day="{day}" x="{x + 3:.1f}" y="{base - height:.1f}" '
                   f'width="{step - 6:.1f}" height="{height:.1f}"><title>{day}: {fmt(units)} units</title></rect>'
                   f'<text class="tick" x="{x + step / 2:.1f}" y="{base + 20}" text-anchor="middle">{day[3:]}</text>')
    out.append("</svg>")
    return Markup("".join(out))
