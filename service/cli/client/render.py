"""How jobs and templates look in a terminal (rich tables), and the plain
one-line forms used for logs and states."""
from __future__ import annotations

from datetime import UTC, datetime

from rich.markup import escape as rich_escape

from service.cli.client.common import age, escape, escape_lines
from service.core.text import visible

STATE_STYLE = {"SUCCEEDED": "green", "FAILED": "red", "CANCELLED": "yellow", "CANCELLING": "yellow",
               "EXPIRED": "red", "PARTIALLY_SUCCEEDED": "yellow", "RUNNING": "cyan", "PENDING": "blue",
               "QUEUED": "blue", "PREEMPTED": "magenta"}


def shown_state(job) -> str:
    """The state a person reads: a preempted attempt (FAILED because another job took its
    capacity; a new attempt goes on) is PREEMPTED, not a failure."""
    return "PREEMPTED" if getattr(job, "preempted", False) else str(job.state)


def state(value) -> str:
    text = str(value)
    return f"[{STATE_STYLE.get(text, 'white')}]{escape(text)}[/]"


def progress(p) -> str:
    """`epoch 2/3 loss=0.120 accuracy=0.950`, or '' when nothing was reported."""
    if p is None or p.epoch is None:
        return "" if p is None or not p.phase else p.phase
    text = f"epoch {p.epoch}/{p.epochs}" if p.epochs else f"epoch {p.epoch}"
    metrics = p.metrics or {}
    shown = [k for k in ("loss", "accuracy") if k in metrics] or sorted(metrics)[:2]
    return " ".join([text] + [f"{k}={metrics[k]:.3g}" if metrics[k] is not None else f"{k}=nan" for k in shown])


def log_line(line) -> str:
    """Plain text (printed, not rich markup): what the replica printed, control characters as escapes."""
    return f"[{visible(line.replica)}] {visible(line.message)}"


def jobs_table(jobs):
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False)
    t.add_column("ID", no_wrap=True, min_width=36)  # whole: it is what the other commands take
    for col in ("NAME", "TEMPLATE", "BACKEND", "STATE", "PROGRESS", "AGE"):
        t.add_column(col, no_wrap=col in ("STATE", "AGE"))
    for j in jobs:
        t.add_row(str(j.id), escape(j.display_name), escape(f"{j.template.name}:v{j.template.version}"), j.backend,
                  state(shown_state(j)), escape(progress(j.progress)), age(j.created_at))
    return t


SHORT_ID = 8  # as git shows hashes; any unique prefix of 4 or more is taken back


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else (text[:width - 1] + "\u2026" if width > 1 else text[:width])


def jobs_compact(jobs, width: int = 80) -> str:
    """One screen's table (rich markup): short ids, relative ages, the name, template and progress
    cut with … so that no line is longer than `width`. `-o wide` has everything whole."""
    rows = [[str(j.id)[:SHORT_ID], shown_state(j), f"{age(j.created_at)} ago", visible(j.display_name),
             visible(f"{j.template.name}:v{j.template.version}"), visible(progress(j.progress))] for j in jobs]
    head = ["ID", "STATE", "AGE", "NAME", "TEMPLATE", "PROGRESS"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    gap = 2
    room = width - sum(widths[:3]) - gap * (len(head) - 1)
    # Name, template and progress share what is left; the widest gives way first.
    while sum(widths[3:]) > room and max(widths[3:]) > 4:
        i = 3 + widths[3:].index(max(widths[3:]))
        widths[i] -= 1
    lines = []
    for n, r in enumerate([head, *rows]):
        cells = [_fit(c, w).ljust(w) for c, w in zip(r, widths, strict=True)]
        cells[-1] = cells[-1].rstrip()
        text = [rich_escape(c) for c in cells]
        if n == 0:
            text = [f"[bold]{c}[/]" for c in text]
        else:
            text[1] = f"[{STATE_STYLE.get(r[1], 'white')}]{text[1]}[/]"
        lines.append((" " * gap).join(text).rstrip())
    return "\n".join(lines)


def duration(start: datetime | None, end: datetime | None, now: datetime | None = None) -> str:
    """`1h02m`, `3m05s`, `12s`; '-' before it started."""
    if start is None:
        return "-"
    seconds = max(int(((end or now or datetime.now(UTC)) - start).total_seconds()), 0)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _stamp(value) -> datetime | None:
    if isinstance(value, datetime) or value is None:
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _wish_text(wish) -> str:
    """A job's placement wish in a line ("cheapest, start by 2026-12-01T09:00:00Z; sim2 0.10/h, sim1 1.00/h")."""
    w = wish if isinstance(wish, dict) else wish.model_dump()
    text = w.get("prefer") or "listed"
    if w.get("start_by"):
        start_by = w["start_by"]
        text += f", start by {start_by.isoformat() if isinstance(start_by, datetime) else start_by}"
    prices = w.get("prices") or {}
    if prices:
        text += "; " + ", ".join(f"{n} {'no price' if p is None else f'{p:.2f}/h'}" for n, p in prices.items())
    return text


def output_rows(job) -> list[tuple[str, str]]:
    """Where the job writes, as its backend tells its replicas (AIP_* of the chief's exact
    environment: the run folder for a local job, gs:// on Vertex): the model (the trainer's
    own report once it saved it), the checkpoints and the TensorBoard logs."""
    env = job.cluster[0].env if job.cluster else {}
    board = job.resources.get("tensorboard") if isinstance(job.resources.get("tensorboard"), dict) else {}
    saved = job.progress.model_dir if job.progress else None
    rows: list[tuple[str, str]] = []
    for key, value, note in (("model", saved, ""), ("model", env.get("AIP_MODEL_DIR"), "(where the trainer saves it)"),
                             ("checkpoints", env.get("AIP_CHECKPOINT_DIR"), ""),
                             ("tensorboard", env.get("AIP_TENSORBOARD_LOG_DIR") or board.get("log_dir"), "")):
        if value and key not in (k for k, _ in rows):
            rows.append((key, escape(str(value)) + (f" [dim]{note}[/]" if note else "")))
    return rows


def _place_text(place) -> str:
    """A waiting job's place in one queue: where, its likely start and at the latest, and why."""
    where = ("not yet placed" if place.position is None else
             "starts on the next pass" if place.position == 0 else f"position {place.position}")
    for label, at in (("likely start", place.likely_start), ("at the latest", place.estimated_start)):
        if at is not None:
            where += f", {label} {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    return escape(where) + f" [dim]({escape_lines(place.why)})[/]"


def job_detail(job):
    from rich.console import Group
    from rich.table import Table
    info = Table.grid(padding=(0, 2))
    info.add_column(style="bold")
    info.add_column()
    rows = [("id", str(job.id)), ("name", escape(job.display_name)),
            ("template", escape(f"{job.template.name} v{job.template.version}")), ("backend", job.backend),
            ("state", state(shown_state(job)) + (f" [dim](as of {age(job.state_observed_at)} ago)[/]"
                                          if job.state_observed_at and not job.state.final else "")),
            ("created", f"{job.created_at:%Y-%m-%d %H:%M:%S} ({age(job.created_at)} ago)"
                                          f" by {escape(job.created_by)}")]
    if len(job.attempts) > 1 or job.attempt > 1:
        rows.append(("attempt", f"{job.attempt} of {len(job.attempts)} so far"
                                + (f", retry of {job.retry_of}" if job.retry_of else "")
                                + (f", retried as {job.retried_by}" if job.retried_by else "")))
    if job.relaunch_of:
        rows.append(("relaunch of", str(job.relaunch_of)))
    if job.accepts:
        rows.append(("backends", escape(", ".join(job.accepts) + " (most preferred first)")))
    if job.placement:
        rows.append(("placement", escape_lines(job.placement)))
    if getattr(job, "wish", None):
        rows.append(("wish", escape(_wish_text(job.wish))))
    if job.waiting_reason:
        rows.append(("waiting", escape_lines(job.waiting_reason)))
    # Its place in each queue it waits in (a job of several backends waits in each).
    places = dict(job.queues) if getattr(job, "queues", None) else ({job.backend: job.queue} if job.queue else {})
    for name, place in places.items():
        rows.append((f"queue ({name})" if len(places) > 1 else "queue", _place_text(place)))
    if job.started_at:
        rows.append(("started", f"{job.started_at:%Y-%m-%d %H:%M:%S}"))
    if job.ended_at:
        rows.append(("ended", f"{job.ended_at:%Y-%m-%d %H:%M:%S}"))
    if job.started_at:
        rows.append(("duration", duration(job.started_at, job.ended_at) + ("" if job.ended_at else " so far")))
    if job.progress:
        rows.append(("progress", escape(progress(job.progress))))
    if job.parameters:
        rows.append(("parameters", escape(", ".join(f"{k}={v}" for k, v in job.parameters.items()))))
    if job.labels:
        rows.append(("labels", escape(", ".join(f"{k}={v}" for k, v in job.labels.items()))))
    if job.console_url:
        rows.append(("console", job.console_url))
    if job.backend_ref:
        rows.append(("backend ref", escape(job.backend_ref)))
    if job.error and getattr(job, "preempted", False):   # another job's turn, not this job's failure
        rows.append(("preempted", escape_lines(str(job.error.get("message") or "stopped for another job"))
                     + (f"; attempt {job.attempt + 1} goes on: {job.retried_by}" if job.retried_by else "")))
    elif job.error:
        rows.append(("error", f"[red]{escape_lines(str(job.error.get('message') or job.error))}[/]"))
    rows += output_rows(job)
    for k, v in rows:
        info.add_row(k, v)
    return Group(info, "", replicas_table(job))


def replicas_table(job):
    """Each replica: role, state, exit code, how long it ran, and its command. A replica's own
    state is the backend's record of its process (`status`); without one, the job's."""
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False, title="replicas", title_justify="left")
    for col in ("TASK", "ROLE", "STATE", "EXIT", "DURATION", "COMMAND"):
        t.add_column(col, no_wrap=col != "COMMAND")
    failed = (job.error or {}).get("replica")
    for r in job.cluster:
        st = r.status or {}
        code = st.get("exit_code")
        if code is None and failed == r.task_name:
            code = (job.error or {}).get("exit_code")
        shown = st.get("state") or ("FAILED" if failed == r.task_name else str(job.state))
        started, ended = _stamp(st.get("started_at")), _stamp(st.get("ended_at"))
        ran = duration(started, ended) if started else "-"
        exit_text = "-" if code is None else str(code) + (f" ({st['signal']})" if st.get("signal") else "")
        t.add_row(escape(r.task_name), escape(r.tf_role or "-"), state(shown), escape(exit_text), ran,
                  escape(" ".join(r.command + r.args)))
    return t


def cluster_table(cluster):
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False, title="replicas", title_justify="left")
    for col in ("TASK", "ROLE", "IMAGE", "COMMAND"):
        t.add_column(col)
    for r in cluster:
        t.add_row(escape(r.task_name), escape(r.tf_role or "-"), escape(r.image_uri), escape(" ".join(r.command + r.args)))
    return t


def events_table(events):
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("AT", "FROM", "TO", "ACTOR", "REASON"):
        t.add_column(col)
    for e in events:
        t.add_row(f"{e.at:%Y-%m-%d %H:%M:%S}", str(e.from_state or "-"), state(e.to_state), escape(e.actor),
                  escape_lines(e.reason))
    return t


def templates_table(templates):
    from rich.table import Table
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("NAME", "VERSION", "UPDATED", "DESCRIPTION"):
        t.add_column(col)
    for tp in templates:
        name = escape(tp.name) + (" [dim](archived)[/]" if tp.archived else "")
        desc = tp.description if len(tp.description) <= 70 else tp.description[:67] + "..."
        t.add_row(name, str(tp.latest_version), f"{age(tp.updated_at)} ago", escape(desc))
    return t
