"""What every client command shares: the client, --output, exit codes, turning
errors into one clear message, and parsing KEY=VALUE arguments."""
from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# Exit codes. A followed or awaited job's final state decides the code.
OK, JOB_FAILED, ERROR, UNREACHABLE = 0, 1, 2, 3
JOB_CANCELLED, JOB_EXPIRED, JOB_PARTIAL = 4, 5, 6
WAIT_TIMEOUT = 124  # as coreutils' timeout
INTERRUPTED = 130
STATE_EXIT = {"SUCCEEDED": OK, "FAILED": JOB_FAILED, "CANCELLED": JOB_CANCELLED, "EXPIRED": JOB_EXPIRED,
              "PARTIALLY_SUCCEEDED": JOB_PARTIAL}


def client_options(p: argparse.ArgumentParser, *, wide: bool = False) -> argparse.ArgumentParser:
    p.add_argument("-o", "--output", choices=["text", "wide", "json"] if wide else ["text", "json"], default="text",
                   help=("wide: every column, whole ids; " if wide else "")
                   + "json: machine-readable output on stdout (default: text)")
    p.add_argument("--url", help="the service (default: TRAINJOBS_URL, then the URL saved by `trainjobs login`)")
    return p


def reference(text: str) -> str:
    """A job or sweep as typed: a whole id, a unique id prefix (4 hex digits or more) or a
    display name; make_client resolves it with the service."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected an id, an id prefix or a display name")
    return text


def make_client(args):
    """The client for a command; a job or sweep it names (args.job, args.sweep: an id, a unique
    prefix or a display name) is resolved to its id here, so every command takes all three."""
    from trainjobs_client import Client
    client = Client(url=args.url)
    try:
        if getattr(args, "job", None):
            args.job = client.resolve(args.job)
        if getattr(args, "sweep", None):
            args.sweep = client.sweeps.resolve(args.sweep)
    except BaseException:
        client.close()
        raise
    return client


# Piped output is not cut at 80 columns: scripts and grep see whole lines.
PIPE_WIDTH = 400


def stderr_console():
    from rich.console import Console
    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console():
    from rich.console import Console
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def screen_width(default: int = 80) -> int:
    """The terminal's width, or COLUMNS, or `default` when piped without it: what a table
    meant to fit one screen (`jobs list`) is cut to."""
    import os
    import shutil
    if sys.stdout.isatty():
        return shutil.get_terminal_size((default, 24)).columns
    try:
        return max(int(os.environ.get("COLUMNS", "")), 40)
    except ValueError:
        return default


def to_jsonable(value: Any) -> Any:
    from pydantic import BaseModel
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def print_json(value: Any, *, compact: bool = False) -> None:
    data = to_jsonable(value)
    sys.stdout.write((json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=2)) + "\n")
    sys.stdout.flush()


def handles_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Client errors become one message on stderr and an exit code, never a traceback."""
    @functools.wraps(fn)
    def run(args) -> int:
        import logging
        try:
            from trainjobs_client import (
                Ambiguous,
                ApiError,
                ConnectionFailed,
                TrainjobsError,
                WaitTimeout,
            )
        except ImportError:
            print("trainjobs: this command needs the Python client: pip install ./clients/python "
                  "(scripts/install.sh does it)", file=sys.stderr)
            return ERROR
        # httpx logs every request at INFO: noise on a person's terminal.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        err = stderr_console()
        try:
            return fn(args)
        except ApiError as e:
            if getattr(args, "output", "text") == "json":
                print(json.dumps({"status": e.status, "title": e.title, "detail": e.detail, "type": e.type,
                                  "errors": [vars(x) for x in e.errors], **e.extra}), file=sys.stderr)
            else:
                err.print(f"[bold red]trainjobs: {e.status} {e.title}[/]: {escape(e.detail)}")
                for fe in e.errors:
                    err.print(f"  - [bold]{escape(fe.field)}[/]: {escape(fe.message)}"
                              + (f" [dim]({escape(fe.fix)})[/]" if fe.fix else ""))
            return ERROR
        except ConnectionFailed as e:
            err.print(f"[bold red]trainjobs:[/] {escape(str(e))}\n  Is the service running? Point at it with "
                      "TRAINJOBS_URL or `trainjobs login --url URL`.")
            return UNREACHABLE
        except WaitTimeout as e:
            err.print(f"[yellow]trainjobs: {escape(str(e))}[/]")
            return WAIT_TIMEOUT
        except Ambiguous as e:
            _ambiguous(e, args, err)
            return ERROR
        except (TrainjobsError, UsageError) as e:
            err.print(f"[bold red]trainjobs:[/] {escape(str(e))}")
            return ERROR
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            return INTERRUPTED
        except BrokenPipeError:
            # `trainjobs jobs logs ... | head`: the reader has gone; so has our interest.
            import os
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return OK
    return run


def age(when: datetime | None, now: datetime | None = None) -> str:
    """`3m`, `2h`, `5d`: how long ago."""
    if when is None:
        return "-"
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _ambiguous(e, args, err) -> None:
    """Several jobs (or sweeps) match what was typed: each with its id, name, state and age."""
    if getattr(args, "output", "text") == "json":
        print(json.dumps({"title": "ambiguous", "detail": str(e), "candidates": [
            {"id": str(c.id), "display_name": c.display_name, "state": str(c.state),
             "created_at": c.created_at.isoformat()} for c in e.candidates], "more": e.more}), file=sys.stderr)
        return
    err.print(f"[bold red]trainjobs:[/] {escape(str(e))}:")
    for c in e.candidates:
        err.print(f"  {c.id}  {escape(c.display_name)}  [bold]{escape(str(c.state))}[/]  {age(c.created_at)} ago")
    if e.more:
        err.print(f"  … and more: `trainjobs {e.kind}s list` shows them all")


class UsageError(Exception):
    """A bad argument, found after argparse (e.g. a file that does not parse)."""


def escape(text: str) -> str:
    """Text from the service (names, reasons, log lines) for a rich console: its markup escaped and
    its control and bidirectional characters written as escapes (\\x1b, \\u202e), so that what a
    replica printed or a teammate named a job cannot move the cursor, retitle the terminal or
    write the clipboard. `-o json` keeps the exact text."""
    from rich.markup import escape as rich_escape

    from service.core.text import visible
    return rich_escape(visible(text))


def escape_lines(text: str) -> str:
    """escape() for text whose line breaks mean something (an error with its log tail, a
    reason): each line on a line of its own (a table cell keeps them in its column, so they
    stay indented under it); every other control and bidi character is still an escape."""
    from rich.markup import escape as rich_escape

    from service.core.text import visible
    return rich_escape(visible(text, keep_lines=True))


def yaml_text(doc: Any, **options) -> str:
    """YAML for a terminal and for `templates apply` to read back: with Unicode as it is, unless
    some string has a control or bidirectional character PyYAML would write raw (U+202E is
    "printable" to it); then with every non-ASCII character escaped (\\u202e), the same values."""
    import yaml

    from service.core.text import visible
    text = yaml.safe_dump(doc, allow_unicode=True, **options)
    if visible(text, keep_lines=True) == text:
        return text
    return yaml.safe_dump(doc, allow_unicode=False, **options)


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}") from None
    return key.strip(), value


def json_or_text(value: str) -> Any:
    """`4` -> 4, `true` -> True, `null` -> None, `[1,2]` -> list; anything else stays text."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def set_path(patch: dict, path: str, value: Any) -> None:
    """--set workers.replica_count=4 -> {"workers": {"replica_count": 4}} (a JSON merge patch)."""
    keys = path.split(".")
    if not all(keys):
        raise UsageError(f"--set {path!r}: a path is keys joined by dots, e.g. workers.replica_count")
    node = patch
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


_DURATION = re.compile(r"^(\d+)([smhdw])$")


def since_time(text: str) -> datetime:
    """`30m`, `2h`, `7d` ago, or an RFC 3339 time."""
    m = _DURATION.match(text)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        delta = timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[unit]: n})
        return datetime.now(UTC) - delta
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration like 30m, 2h, 7d or an RFC 3339 time, got {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def exit_for(state) -> int:
    return STATE_EXIT.get(str(state), JOB_FAILED)


def load_document(path: Path | str):
    """A YAML or JSON file (YAML is a superset of JSON); `-` reads stdin."""
    import yaml
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
        return yaml.safe_load(text)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"{path} is neither valid YAML nor JSON: {e}") from None
