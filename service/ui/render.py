"""Jinja2 rendering for the UI: one environment, autoescaped, with the formatting
helpers the pages share; and the security headers every UI answer carries."""
from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from service.core.text import visible
from service.lifecycle.states import TERMINAL, JobState
from service.ui import markup
from service.ui.render_format import (
    age,
    amounts,
    clock,
    declared,
    duration_between,
    iso,
    money,
    number,
    pretty,
    seconds,
    span,
    when,
)
from service.web.security_headers import SECURITY_HEADERS

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

TERMINAL_NAMES = frozenset(s.value for s in TERMINAL)


def _asset_versions() -> dict[str, str]:
    # ?v=<content hash>: browsers may cache assets for long, and still get new ones.
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in STATIC.iterdir() if p.is_file()}


def asset(name: str) -> str:
    return f"/ui/static/{name}?v={_VERSIONS.get(name, '0')}"


def _shown(value):
    """Every {{ value }} of a page: text from callers and replicas (names, log lines, reasons) with
    its control and bidirectional characters as escapes (`\\x1b`, `\\u202e`; line breaks and tabs
    kept), so that none reorders, hides or forges what the page shows. Markup is the page's own."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value, keep_lines=True)
    return value


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=_shown)
    env.globals.update(asset=asset, state_icons=markup.STATE_ICONS, terminal=TERMINAL_NAMES,
                       states=[s.value for s in JobState], state_badge=markup.state_badge,
                       progress_bar=markup.progress_bar, time_ago=markup.time_ago, local_time=markup.local_time,
                       run_time=markup.run_time,
                       csrf_field=markup.csrf_field, epoch_rows=markup.epoch_rows)
    env.filters.update(age=age, amounts=amounts, clock=clock,
                       declared=declared, iso=iso, money=money, span=span, when=when, pretty=pretty,
                       number=number, duration=duration_between, seconds=seconds)
    return env


_VERSIONS = _asset_versions()
ENV = _env()


def render(request: Request, template_name: str, status: int = 200, /, **context) -> HTMLResponse:
    user = context.pop("user", None)
    html = ENV.get_template(template_name).render(request=request, user=user, now=datetime.now(UTC),
                                             **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def render_fragment(template_name: str, /, **context) -> str:
    return ENV.get_template(template_name).render(now=datetime.now(UTC), **context)
