"""Following a job's logs in a terminal: one plain line per log line with the
replica as prefix, and (on a terminal) an epoch bar with the latest metrics fed
by the trainer's progress lines."""
from __future__ import annotations

import json
import sys
from contextlib import nullcontext

from service.cli.client import render
from service.cli.client.common import escape, print_json

CHIEF = "workerpool0-0"


class EpochBar:
    """A rich progress bar: state, epochs done of all, the last epoch's metrics."""

    def __init__(self, console, label: str):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("epochs"), TextColumn("{task.fields[metrics]}"), TimeElapsedColumn(),
                                 console=console, redirect_stdout=False, redirect_stderr=False)
        self.task = self.progress.add_task(label, total=None, metrics="")

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def print(self, text: str) -> None:
        self.progress.console.out(text, highlight=False)

    def update_from(self, line) -> None:
        if line.replica != CHIEF or not line.message.startswith("{"):
            return
        try:
            event = json.loads(line.message)
        except ValueError:
            return
        if not isinstance(event, dict) or event.get("event") != "epoch_end":
            return
        epoch, epochs = event.get("epoch"), event.get("epochs")
        if not isinstance(epoch, int):
            return
        raw_metrics = event.get("metrics")
        metrics = raw_metrics if isinstance(raw_metrics, dict) else {}
        # Metric names are the replica's: shown as text, not markup, without control characters.
        shown = " ".join(f"{escape(str(k))}={v:.4g}" for k, v in list(metrics.items())[:4]
                         if isinstance(v, (int, float)))
        self.progress.update(self.task, completed=epoch, total=epochs if isinstance(epochs, int) else None,
                             metrics=shown)


def follow_logs(client, job, *, output: str, replica: str | None = None, since: str | None = None,
                label: str = "training"):
    """Print the job's logs until it ends; returns the stream's end (final state, error)."""
    stream = client.logs(job, follow=True, replica=replica, since=since)
    bar = None
    if output == "text" and sys.stdout.isatty() and sys.stderr.isatty():
        from rich.console import Console
        bar = EpochBar(Console(highlight=False), label)
    with bar or nullcontext():
        for line in stream:
            if output == "json":
                print_json(line, compact=True)
            elif bar is not None:
                bar.print(render.log_line(line))
                bar.update_from(line)
            else:
                sys.stdout.write(render.log_line(line) + "\n")
                sys.stdout.flush()
    return stream.end
