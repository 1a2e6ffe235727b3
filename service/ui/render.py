"""Jinja2 rendering for the UI: one environment, autoescaped, with the formatting
helpers the pages share; and the security headers every UI answer carries."""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from service.jobs.states import TERMINAL, JobState

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Scripts and styles come from /ui/static only (no inline code): a hostile string that
# slipped into a page still could not run.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY", "Cache-Control": "no-store"}

STATE_ICONS = {
    "QUEUED": "◷", "PENDING": "◔", "RUNNING": "▶", "SUCCEEDED": "✔", "FAILED": "✖",
    "CANCELLING": "⊘", "CANCELLED": "⊘", "PAUSED": "❚❚", "EXPIRED": "⊗", "UPDATING": "↻",
    "PARTIALLY_SUCCEEDED": "◐",
}
TERMINAL_NAMES = frozenset(s.value for s in TERMINAL)


def _asset_versions() -> dict[str, str]:
    # ?v=<content hash>: browsers may cache assets for long, and still get new ones.
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in STATIC.iterdir() if p.is_file()}


def asset(name: str) -> str:
    return f"/ui/static/{name}?v={_VERSIONS.get(name, '0')}"


def age(at: datetime | None, now: datetime | None = None) -> str:
    if at is None:
        return "—"
    return duration((now or datetime.now(timezone.utc)) - at) + " ago"


def duration_between(start: datetime | None, end: datetime | None, now: datetime | None = None) -> str:
    if start is None:
        return "—"
    return duration((end or now or datetime.now(timezone.utc)) - start)


def duration(delta) -> str:
    s = max(0, int(delta.total_seconds()))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def iso(at: datetime | None) -> str:
    # Fixed width (microseconds always), so the pages' scripts order these as strings.
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if at else ""


def when(at: datetime | None) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "—"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return str(value)


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(asset=asset, state_icons=STATE_ICONS, terminal=TERMINAL_NAMES,
                       states=[s.value for s in JobState])
    env.filters.update(age=age, iso=iso, when=when, pretty=pretty, number=number, duration=duration_between)
    return env


_VERSIONS = _asset_versions()
ENV = _env()


def render(request: Request, template_name: str, status: int = 200, /, **context) -> HTMLResponse:
    user = context.pop("user", None)
    html = ENV.get_template(template_name).render(request=request, user=user, now=datetime.now(timezone.utc),
                                             **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def render_fragment(template_name: str, /, **context) -> str:
    return ENV.get_template(template_name).render(now=datetime.now(timezone.utc), **context)
