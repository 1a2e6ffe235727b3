"""Following a job in a terminal: its log lines with the replica first and, from the
trainer's progress lines (JSON: train_start, epoch_end, evaluation, train_end), one
status line. On a terminal that line stays at the bottom and is redrawn in place
(what the job is doing before training starts, then epoch e/E, steps, metrics); piped,
each progress line becomes one plain readable line and nothing moves the cursor.
`-o json` prints every line exactly as the replica wrote it."""
from __future__ import annotations

import json
import sys
import threading
import time

from service.cli.client import render
from service.cli.client.common import escape, print_json
from service.core.text import plural, visible

# How often the status line asks the service for the job's state (QUEUED, PENDING, ...)
# while no progress line says more; a second client, so the log stream is never held up.
STATE_POLL_SECONDS = 2.0
PROGRESS_EVENTS = ("train_start", "epoch_end", "evaluation", "train_end")
WAITING = {"QUEUED": "waiting to be launched", "PENDING": "waiting for replicas",
           "UPDATING": "updating", "CANCELLING": "stopping", "PAUSED": "paused"}


def progress_event(message: str) -> dict | None:
    """A trainer progress line as a dict, or None for any other line."""
    if not message.startswith("{") or '"event"' not in message:
        return None
    try:
        event = json.loads(message)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) and event.get("event") in PROGRESS_EVENTS else None


def _metrics(metrics, limit: int = 4) -> str:
    if not isinstance(metrics, dict):
        return ""
    # Metric names are the replica's: shown without control characters.
    return " ".join(f"{visible(str(k))}={v:.4g}" for k, v in list(metrics.items())[:limit]
                    if isinstance(v, (int, float)) and not isinstance(v, bool))


def describe_event(event: dict) -> str:
    """`epoch 2/5 · 89 steps · loss=0.31 accuracy=0.9`, one plain line for a progress event."""
    kind = event["event"]
    if kind == "train_start":
        epochs = event.get("epochs")
        return "training started" + (f": {plural(epochs, 'epoch')}" if isinstance(epochs, int) else "")
    if kind == "train_end":
        where = event.get("model_dir")
        return "training finished" + (f"; model saved to {visible(str(where))}" if where else "")
    epoch, epochs = event.get("epoch"), event.get("epochs")
    head = ("evaluation of " if kind == "evaluation" else "") + \
        (f"epoch {epoch}/{epochs}" if isinstance(epochs, int) else f"epoch {epoch}")
    parts = [head]
    if isinstance(event.get("steps"), int):
        parts.append(plural(event["steps"], "step"))
    if _metrics(event.get("metrics")):
        parts.append(_metrics(event.get("metrics")))
    return " · ".join(parts)


class StatusLine:
    """What the job is doing, in one line: its state until training starts, then the
    chief's latest epoch and metrics (and the evaluator's, if it reports)."""

    def __init__(self, label: str, state: str = "QUEUED"):
        self.label, self.state = label, state
        self.reason: str | None = None
        self.training: str | None = None
        self.evaluation: str | None = None
        self.started = time.monotonic()

    def update(self, event: dict) -> None:
        text = describe_event(event)
        if event["event"] == "evaluation":
            self.evaluation = text
        else:
            self.training = text
            self.state = "RUNNING"

    def text(self) -> str:
        elapsed = int(time.monotonic() - self.started)
        clock = f"{elapsed // 60}:{elapsed % 60:02d}"
        if self.training is None:
            doing = WAITING.get(self.state) or ("running, no progress reported yet" if self.state == "RUNNING"
                                                 else "")
            if self.reason and self.state == "QUEUED":
                doing = visible(self.reason)
            body = f"{self.state}: {doing}" if doing else self.state
        else:
            body = self.training + (f" | {self.evaluation}" if self.evaluation else "")
        return f"{visible(self.label)}  {body}  {clock}"


class _StatePoller(threading.Thread):
    """Keeps the status line's state current before training reports anything."""

    def __init__(self, url: str | None, job_id: str, status: StatusLine, redraw):
        super().__init__(daemon=True)
        self.url, self.job_id, self.status, self.redraw = url, job_id, status, redraw
        self.stop = threading.Event()

    def run(self) -> None:
        from trainjobs_client import Client, TrainjobsError
        with Client(url=self.url, retries=0) as client:
            while not self.stop.is_set():
                try:
                    job = client.get(self.job_id)
                    if self.status.training is None or job.final:
                        self.status.state = str(job.state)
                    self.status.reason = job.waiting_reason
                    self.redraw()
                except TrainjobsError:
                    pass  # the log stream says when the service is away; this line just waits
                self.stop.wait(STATE_POLL_SECONDS)


def follow_logs(client, job, *, output: str, replica: str | None = None, since: str | None = None,
                label: str | None = None, url: str | None = None):
    """Print the job's logs until it ends, riding out restarts of the service (the client's
    reconnect window, TRAINJOBS_RECONNECT_SECONDS); returns the stream's end (final state, error)."""
    if output == "text" and sys.stdout.isatty() and sys.stderr.isatty():
        return _follow_live(client, job, replica, since, label, url)
    err = sys.stderr

    def note(text: str) -> None:
        err.write(f"trainjobs: {text}\n")
        err.flush()

    stream = client.logs(job, follow=True, replica=replica, since=since, on_reconnect=note)
    for line in stream:
        if output == "json":
            print_json(line, compact=True)
            continue
        event = progress_event(line.message)
        text = f"[{visible(line.replica)}] {describe_event(event)}" if event else render.log_line(line)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    return stream.end


def _follow_live(client, job, replica, since, label, url):
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    job_id = str(getattr(job, "id", job))
    status = StatusLine(label or (getattr(job, "display_name", None) or job_id[:8]),
                        str(getattr(job, "state", "QUEUED")))
    console = Console(highlight=False)
    live = Live(Text(status.text()), console=console, auto_refresh=False, transient=False,
                redirect_stdout=False, redirect_stderr=False)
    lock = threading.Lock()
    ended = threading.Event()

    def redraw() -> None:
        with lock:
            if not ended.is_set():  # the poller may answer after the end: the last line stays
                live.update(Text(status.text(), style="bold"), refresh=True)

    def note(text: str) -> None:
        with lock:
            console.print(f"[yellow]trainjobs: {escape(text)}[/]")

    poller = _StatePoller(url, job_id, status, redraw)
    stream = client.logs(job_id, follow=True, replica=replica, since=since, on_reconnect=note)
    with live:
        poller.start()
        try:
            for line in stream:
                event = progress_event(line.message)
                if event is not None:
                    status.update(event)
                else:
                    with lock:
                        console.out(render.log_line(line), highlight=False)
                redraw()
            if stream.end is not None:
                status.state = str(stream.end.state)
                redraw()
        finally:
            ended.set()
            poller.stop.set()
    return stream.end
