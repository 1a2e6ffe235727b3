"""The severity of a log line, for its colour on the job page: errors, warnings and
tracebacks stand out whatever stream they came on (TensorFlow and Python's logging
write INFO to stderr, so a healthy job's stderr is mostly INFO). static/job.js
classifies live lines with the same rules (`TJ.severity`); tests/ui hold both to
one table of lines."""
from __future__ import annotations

import re

# A line that is (part of) a Python traceback: its head, a frame, or a frame's code.
TRACEBACK_HEAD = re.compile(r"^Traceback \(most recent call last\):")
TRACEBACK_BODY = re.compile(r"^\s+(File \".*\", line \d+|\S)")
# Errors: Python logging levels, glog/absl ("E1125 10:00:00.1 ..."), TensorFlow's C++ log
# ("2026-11-25 10:00:00.1: E external/...cc:282] ..."), an exception's last line ("ValueError: ..."),
# argparse's fatal line ("trainer: error: unrecognized arguments: --x", what the job's error quotes).
ERROR = re.compile(r"\b(ERROR|CRITICAL|FATAL)\b|^[EF]\d{4} \d\d:|: [EF] \S+:\d+\]"
                   r"|^([A-Za-z_][\w.]*)?(Error|Exception|Interrupt|Exit)(: |:?$)|^[\w.-]+: error: ")
WARNING = re.compile(r"\b(WARNING|WARN)\b|^W\d{4} \d\d:|: W \S+:\d+\]|\b\w*Warning: ")


class Classifier:
    """Classifies the lines of one replica in order: a traceback's frames are indented
    lines after its head, and the exception line that ends it is an error."""

    def __init__(self) -> None:
        self.in_traceback = False

    def __call__(self, message: str) -> str:
        """"error", "warning", "traceback" or "" (an ordinary line)."""
        if TRACEBACK_HEAD.match(message):
            self.in_traceback = True
            return "traceback"
        if self.in_traceback:
            if TRACEBACK_BODY.match(message):
                return "traceback"
            self.in_traceback = False
            return "error"  # the exception that ended the traceback, whatever its wording
        if ERROR.search(message):
            return "error"
        if WARNING.search(message):
            return "warning"
        return ""


def severities(lines) -> list[str]:
    """The severity of each line (anything with .replica, .stream and .message), a classifier per
    replica and stream: a traceback is written to one stream, and lines of the other stream may
    come between its lines in time order."""
    by_stream: dict[tuple[str, str], Classifier] = {}
    return [by_stream.setdefault((ln.replica, getattr(ln, "stream", "")), Classifier())(ln.message)
            for ln in lines]
