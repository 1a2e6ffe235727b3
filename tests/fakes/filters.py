"""The list-filter language both fakes accept: Google's "standard list filter"
(AIP-160) as Vertex AI documents it for customJobs.list, and the subset of the
Cloud Logging query language our service sends.

    expr        := sequence
    sequence    := factor ( [AND] factor )*      juxtaposition is AND (Logging)
    factor      := term ( OR term )*             OR binds tighter than AND (AIP-160)
    term        := [NOT | -] simple
    simple      := "(" expr ")" | restriction
    restriction := FIELD OP VALUE                 OP: = != < <= > >= :

Each fake says what a restriction means (`compare`), so an unknown field or a
bad value is a 400 INVALID_ARGUMENT, as at Google."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

OPS = ("!=", "<=", ">=", "=", "<", ">", ":")


class FilterError(ValueError):
    pass


@dataclass(frozen=True)
class Restriction:
    field: str
    op: str
    value: str


Node = tuple  # ("and", [..]) | ("or", [..]) | ("not", node) | ("cmp", Restriction)

_TOKEN = re.compile(r"""
    (?P<lp>\() | (?P<rp>\)) |
    (?P<str>"(?:[^"\\]|\\.)*") |
    (?P<op>!=|<=|>=|=|<|>|:) |
    (?P<word>[^\s()"=!<>:]+)
    """, re.VERBOSE)
# After an operator the value runs to the next space or parenthesis, so an
# unquoted timestamp keeps its colons.
_VALUE = re.compile(r'(?P<str>"(?:[^"\\]|\\.)*")|(?P<word>[^\s()]+)')


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        pattern = _VALUE if out and out[-1][0] == "op" else _TOKEN
        m = pattern.match(text, pos)
        if not m or m.end() == pos:
            raise FilterError(f"cannot parse filter at offset {pos}: {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def parse(self) -> Node:
        if not self.toks:
            return ("and", [])
        node = self.sequence()
        if self.i != len(self.toks):
            raise FilterError(f"unexpected {self.peek()[1]!r} in filter")
        return node

    def sequence(self) -> Node:
        items = [self.factor()]
        while True:
            kind, val = self.peek()
            if kind is None or kind == "rp":
                break
            if kind == "word" and val == "AND":
                self.take()
            items.append(self.factor())
        return items[0] if len(items) == 1 else ("and", items)

    def factor(self) -> Node:
        items = [self.term()]
        while self.peek() == ("word", "OR"):
            self.take()
            items.append(self.term())
        return items[0] if len(items) == 1 else ("or", items)

    def term(self) -> Node:
        kind, val = self.peek()
        if kind == "word" and val == "NOT":
            self.take()
            return ("not", self.simple())
        if kind == "word" and val.startswith("-") and len(val) > 1:
            self.toks[self.i] = ("word", val[1:])
            return ("not", self.simple())
        return self.simple()

    def simple(self) -> Node:
        kind, val = self.take()
        if kind == "lp":
            node = self.sequence()
            if self.take()[0] != "rp":
                raise FilterError("missing ')' in filter")
            return node
        if kind != "word":
            raise FilterError(f"expected a field name, got {val!r}")
        op_kind, op = self.take()
        if op_kind != "op":
            raise FilterError(f"expected an operator after {val!r}, got {op!r}")
        v_kind, value = self.take()
        if v_kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        elif v_kind != "word":
            raise FilterError(f"expected a value after {val}{op}")
        return ("cmp", Restriction(val, op, value))


def parse(text: str) -> Node:
    return _Parser(text or "").parse()


def evaluate(node: Node, compare: Callable[[Any, Restriction], bool], record: Any) -> bool:
    kind = node[0]
    if kind == "and":
        return all(evaluate(n, compare, record) for n in node[1])
    if kind == "or":
        return any(evaluate(n, compare, record) for n in node[1])
    if kind == "not":
        return not evaluate(node[1], compare, record)
    return compare(record, node[1])


def restrictions(node: Node) -> list[Restriction]:
    if node[0] == "cmp":
        return [node[1]]
    if node[0] == "not":
        return restrictions(node[1])
    return [r for n in node[1] for r in restrictions(n)]


_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def timestamp_ns(text: str) -> int:
    """RFC 3339 with up to nanoseconds -> integer nanoseconds since the epoch."""
    m = _TS.match(text.strip())
    if not m:
        raise FilterError(f"invalid RFC 3339 timestamp {text!r}")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    base = datetime.fromisoformat(m.group(1) + zone)
    frac = int((m.group(2) or "0").ljust(9, "0"))
    return int(base.timestamp()) * 1_000_000_000 + frac


def ns_to_rfc3339(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z" if frac else f"{base}Z"


def compare_values(left, op: str, right) -> bool:
    if op == "=":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    raise FilterError(f"operator {op!r} not supported here")
