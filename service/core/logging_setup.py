"""Log lines: JSON for a collector, one text line for a person, and the request id that every
line of a request carries. Kept apart from the web layer (service/web/observability.py): the
CLI sets up logging on every command, and a client command (`trainjobs jobs ...`) must not
import FastAPI and Prometheus to do it (1.5 s of CPU on each call)."""
from __future__ import annotations

import contextvars
import json
import logging
import sys
import time

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class JsonFormatter(logging.Formatter):
    # color_message: uvicorn's copy of its message with ANSI colours, noise in a log line.
    _STD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
               "level": record.levelname, "logger": record.name, "msg": record.getMessage(),
               "request_id": request_id_var.get()}
        for key, value in record.__dict__.items():
            if key not in self._STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            # The trace goes to the server's log only, never into a response.
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """One line a record for a person at a terminal: time, level, logger, message, then the
    record's fields as key=value (an access line: method, route, status, duration_ms)."""

    _STD = JsonFormatter._STD

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in record.__dict__.items() if k not in self._STD and not k.startswith("_")}
        rid = request_id_var.get()
        if rid != "-":
            fields["request_id"] = rid
        line = (f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
                + "".join(f" {k}={v}" for k, v in fields.items()))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def resolved_log_format(fmt: str = "auto", stream=None) -> str:
    """auto: text on a terminal (a person reads it), JSON otherwise (a collector parses it)."""
    if fmt != "auto":
        return fmt
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    handler = logging.StreamHandler()
    if resolved_log_format(fmt, handler.stream) == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic says a line per migration and two about its context on every start: noise at
    # INFO (the first start printed ~20 of them before the token banner); shown at DEBUG.
    logging.getLogger("alembic").setLevel(logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING)
