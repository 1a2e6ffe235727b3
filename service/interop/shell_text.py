"""The shell text of a gcloud import: `cat > FILE <<'EOF'` blocks and the command's words.

The expensive, untrusted part of a gcloud import (shlex is pure Python, a character at a
time), kept apart from gcloud_command's flag rules so that the import worker process
(service/interop/parse_worker.py) can read it without importing the compiler."""
from __future__ import annotations

import bisect
import re
import shlex

# `cat > FILE <<'EOF' ... EOF` before the command, as `trainjobs jobs export` writes a --config file.
# Matched one line at a time (see heredocs): a regex over the whole text that looks for each
# header's end line is quadratic, and holds the GIL (every other request) while it runs.
_HEREDOC_HEAD = re.compile(r"cat > (\S+) <<'?(\w+)'?")


def tokens(text: str) -> list[str]:
    return shlex.split(_join_lines(text), comments=True, posix=True)


def _join_lines(text: str) -> str:
    """Drop the shell's line continuations (backslash, newline), except inside single quotes,
    where the shell keeps them as they are, and in comments."""
    out, quote, i = [], None, 0
    while i < len(text):
        ch = text[i]
        if ch == "#" and quote is None and (i == 0 or text[i - 1] in " \t\r\n"):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out.append(text[i:end])
            i = end
            continue
        if ch == "\\" and quote != "'":
            for newline in ("\n", "\r\n"):
                if text.startswith(newline, i + 1):
                    i += 1 + len(newline)
                    break
            else:
                out.append(text[i:i + 2])
                i += 2
            continue
            out.append(text[i:i + 2])
            i += 2
            continue
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        out.append(ch)
        i += 1
    return "".join(out)


def heredocs(text: str) -> tuple[dict[str, str], str]:
    """({file: body} of the `cat > FILE <<'EOF'` ... `EOF` blocks, the text without them), in linear time:
    each header's end line is found by looking its delimiter up among the lines, not by scanning on."""
    lines = text.split("\n")
    where: dict[str, list[int]] = {}
    for n, line in enumerate(lines):
        where.setdefault(line, []).append(n)
    files: dict[str, str] = {}
    kept: list[str] = []
    n = 0
    while n < len(lines):
        head = _HEREDOC_HEAD.fullmatch(lines[n]) if lines[n].startswith("cat > ") else None
        ends = where.get(head.group(2), []) if head else []
        at = bisect.bisect_right(ends, n)
        if head and at < len(ends):
            end = ends[at]
            files[head.group(1)] = "\n".join(lines[n + 1:end])
            n = end + 1
            continue
        kept.append(lines[n])
        n += 1
    return files, "\n".join(kept)


def read_command(text: str) -> tuple[dict[str, str], list[str]]:
    """({file: body} of the heredocs, the command's words); ValueError for an unclosed quote."""
    files, rest = heredocs(text)
    return files, tokens(rest)
