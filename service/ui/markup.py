"""Small pieces of markup every page repeats (a state badge, a progress bar, a
relative time), as Python functions: the jobs list calls them for every row,
and a Jinja macro call costs several times more. static/common.js builds the
same state badge when a state changes in place."""
from __future__ import annotations

from datetime import datetime

from markupsafe import Markup, escape

from service.ui.render_format import age, duration_between, iso, number, when

STATE_ICONS = {
    "QUEUED": "◷", "PENDING": "◔", "RUNNING": "▶", "SUCCEEDED": "✔", "FAILED": "✖",
    "CANCELLING": "⊘", "CANCELLED": "⊘", "PAUSED": "❚❚", "EXPIRED": "⊗", "UPDATING": "↻",
    "PARTIALLY_SUCCEEDED": "◐",
}
PREEMPTED = "PREEMPTED"     # shown, not stored: a FAILED attempt whose capacity went to another job
PREEMPTED_ICON = "⤼"


def state_badge(state: str, preempted: bool = False) -> Markup:
    """The state as a badge; a preempted attempt (stored FAILED, error.cause "preemption") as
    PREEMPTED in its own colour: it was stopped for another job and a new attempt goes on, so it
    is not a failure. `data-state` keeps the stored state."""
    s = escape(state)
    if preempted:
        return Markup(f'<span class="state state-{PREEMPTED}" data-state="{s}" data-preempted="true">'
                      f'<span class="icon" aria-hidden="true">{PREEMPTED_ICON}</span> <span class="name">{PREEMPTED}'
                      '</span></span>')
    icon = STATE_ICONS.get(state, "•")
    return Markup(f'<span class="state state-{s}" data-state="{s}"><span class="icon" aria-hidden="true">{icon}</span>'
                  f' <span class="name">{s}</span></span>')


def progress_bar(epoch: int | None, epochs: int | None) -> Markup:
    if epoch is not None and epochs:
        return Markup(f'<span class="progress"><progress max="{epochs}" value="{min(epoch, epochs)}" '
                      f'aria-label="epoch {epoch} of {epochs}"></progress> '
                      f'<span class="epochs">epoch {epoch}/{epochs}</span></span>')
    if epoch is not None:
        return Markup(f'<span class="progress"><span class="epochs">epoch {epoch}</span></span>')
    return Markup('<span class="progress muted"><span class="epochs">—</span></span>')


def time_ago(at: datetime | None) -> Markup:
    if at is None:
        return Markup("—")
    return Markup(f'<time datetime="{iso(at)}" title="{when(at)}" data-ago>{age(at)}</time>')


def local_time(at: datetime | None) -> Markup:
    """A moment as UTC in the HTML (pages work without JavaScript); static/common.js shows it
    in the browser's time zone, keeping the UTC in the title."""
    if at is None:
        return Markup("—")
    return Markup(f'<time datetime="{iso(at)}" title="{when(at)}" data-local>{when(at)}</time>')


def run_time(start: datetime | None, end: datetime | None) -> Markup:
    return Markup(f'<span class="duration" data-start="{iso(start)}" data-end="{iso(end)}">'
                  f'{duration_between(start, end)}</span>')


def csrf_field(user) -> Markup:
    return Markup(f'<input type="hidden" name="csrf" value="{escape(user.csrf)}">')


def epoch_rows(rows, names: list[str]) -> Markup:
    """The body of the per-epoch numbers table (up to TRAINJOBS_JOB_EPOCHS_MAX_PER_JOB rows)."""
    out = []
    for r in rows:
        metrics = r.metrics or {}
        cells = "".join(f"<td>{number(metrics.get(n))}</td>" for n in names)
        out.append(f'<tr><th scope="row">{r.epoch}</th>{cells}<td>{number(r.steps)}</td>'
                   f"<td>{number(r.seconds)}</td></tr>")
    return Markup("".join(out))
