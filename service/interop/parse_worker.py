"""The import worker: a process that parses untrusted import text for the API process.

Run as `python -m service.interop.parse_worker MEMORY_BYTES`. It reads requests on stdin and
answers on stdout, one at a time, each a frame: 4 bytes of length (big-endian), then a pickle.
A request is (op, args, cpu_seconds); the answer ("ok", value), ("invalid", [(field, message,
fix), ...]) or ("memory",). Ops: "yaml" (text, YamlLimits) -> the document; "command" (text)
-> ({file: body}, words) of a gcloud command line.

It imports PyYAML, the bounded loader and the shell reader only (no web app, no compiler, no
TensorFlow): a replacement starts in about 50 ms. Its address space is capped (RLIMIT_AS);
each request raises its CPU limit (RLIMIT_CPU, whose default action, SIGXCPU, ends the
process) to what it has used plus the request's allowance, so a parse stops even if the API
process that should kill it is gone. It exits when stdin closes."""
from __future__ import annotations

import math
import pickle
import resource
import sys
from typing import Any

from service.core.errors import Invalid
from service.core.frames import READY, read_frame, write_frame
from service.interop.safe_yaml import load
from service.interop.shell_text import read_command


def handle(op: str, args: tuple) -> Any:
    if op == "yaml":
        text, limits = args
        return load(text, limits)
    if op == "command":
        (text,) = args
        try:
            return read_command(text)
        except ValueError as e:  # an unclosed quote: the caller words the problem
            return str(e)
    raise ValueError(f"unknown op {op!r}")


def _allow_cpu(seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + seconds) + 1  # whole seconds; the API's wall-time bound comes first
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def main(argv: list[str]) -> int:
    memory = int(argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the answer pipe
    write_frame(stdout, READY)
    while True:
        request = read_frame(stdin)
        if request is None:
            return 0
        op, args, cpu_seconds = pickle.loads(request)  # from the API process, which started us
        _allow_cpu(cpu_seconds)
        try:
            answer: tuple = ("ok", handle(op, args))
        except Invalid as e:
            answer = ("invalid", [(p.field, p.message, p.fix) for p in e.problems])
        except MemoryError:
            answer = ("memory",)
        try:
            body = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            body = pickle.dumps(("memory",))
        write_frame(stdout, body)
        if answer[0] == "memory":
            return 0  # the heap may be left fragmented near the cap: the API starts a fresh worker


if __name__ == "__main__":
    sys.exit(main(sys.argv))
