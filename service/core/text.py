"""Text the databases cannot store: NUL characters (PostgreSQL refuses them) and
unpaired UTF-16 surrogates (JSON's \\udxxx escapes allow them; UTF-8 does not)."""
from __future__ import annotations

import re
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import core_schema


def _bad(s: str) -> bool:
    if "\x00" in s:
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def find_unstorable(value: Any, path: str = "") -> str | None:
    """The path of the first string (key or value) that cannot be stored, else None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _bad(item):
                return where or "(value)"
        elif isinstance(item, dict):
            for k, v in item.items():
                sub = f"{where}.{k}" if where else str(k)
                if isinstance(k, str) and _bad(k):
                    return where or "(key)"
                stack.append((v, sub))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


# --- Text shown to people: names, labels, descriptions, log lines ----------------------------------
# Control characters (C0, DEL, C1: ESC starts terminal sequences such as OSC 52, which writes the
# reader's clipboard, or cursor moves that hide and forge lines) and the bidirectional overrides and
# isolates (U+202E shows "exe.txt" for "txt.exe") change what a reader sees. Line and paragraph
# separators break lines where none is expected.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_CONTROL_MULTILINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                                "\u2028\u2029]")   # descriptions may have tabs and newlines


def _char(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def control_problem(text: str, *, multiline: bool = False) -> str | None:
    """Why `text` is refused as a name or description, or None."""
    m = (_CONTROL_MULTILINE if multiline else _CONTROL).search(text)
    if m is None:
        return None
    where = "tabs and line breaks are the only control characters a description may have" if multiline else \
        "names and labels take printable text only"
    return (f"contains the control or bidirectional character U+{ord(m.group()):04X} at position {m.start()}; "
            f"{where} (remove it)")


def visible(text: str, *, keep_lines: bool = False) -> str:
    """`text` with each control or bidirectional character written as an escape (`\\x1b`,
    `\\u202e`), for a terminal or a page: what a replica printed or a caller stored is shown,
    never acted on. Tabs are kept, and line breaks with keep_lines (a page's multi-line text).
    The exact text stays available as JSON."""
    if text.isprintable():
        return text
    pattern = _CONTROL_MULTILINE if keep_lines else _CONTROL
    return pattern.sub(lambda m: "\t" if m.group() == "\t" else _char(m.group()), text)


def _plain(value: str) -> str:
    problem = control_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _multiline(value: str) -> str:
    problem = control_problem(value, multiline=True)
    if problem:
        raise ValueError(problem)
    return value


class _TextRule:
    """An after-validator that also states its rule in the JSON schema (a `pattern`), so the
    OpenAPI document says what is refused (generated clients and schemathesis read it)."""

    def __init__(self, check, refused: str) -> None:
        self.check = check
        self.pattern = f"^[^{refused}]*$"

    def __get_pydantic_core_schema__(self, source, handler: GetCoreSchemaHandler):
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema, handler: GetJsonSchemaHandler):
        out = handler(schema)
        if "pattern" in out:  # a pattern of the field's own: both hold
            out["allOf"] = [*out.get("allOf", []), {"pattern": out.pop("pattern")}]
        out["pattern"] = self.pattern
        return out


# The refused characters of _CONTROL and _CONTROL_MULTILINE, as \u escapes (JSON Schema's
# regular expressions are ECMA-262's; Python's read them alike).
_REFUSED = "\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069\\u2028\\u2029"
_REFUSED_MULTILINE = _REFUSED.replace("\\u0000-\\u001f", "\\u0000-\\u0008\\u000b-\\u001f")

# Pydantic annotations for request fields people read: a display name, a description.
PlainText = _TextRule(_plain, _REFUSED)
MultilineText = _TextRule(_multiline, _REFUSED_MULTILINE)


# --- Words around numbers and names, for messages ---------------------------------------------------

def plural(n: int, one: str, many: str | None = None) -> str:
    """The number with its noun in the number's form: '1 core', '2 cores', '0 jobs',
    '1 worker replica'; `many` where adding an s is wrong ('1 process', '3 processes')."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def with_article(word: str) -> str:
    """'an operator', 'an admin', 'a member': by the first letter, which is right for the
    words it is given (role names, resource names); not for 'hour' or 'user'."""
    return f"{'an' if word[:1].lower() in 'aeiou' and word else 'a'} {word}"
