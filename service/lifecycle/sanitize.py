"""Untrusted values made storable before they reach a row.

Progress comes from a replica's output and errors from Google or a replica's log:
either may carry NaN or Infinity (PostgreSQL's json type refuses them; Python's
json writes tokens no JSON parser reads), NUL characters or unpaired surrogates
(neither database stores them), absurd sizes or nesting. A row that cannot be
stored would stop the job from ever moving on, so everything is cleaned here,
once, by the only writer."""
from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 8
MAX_ITEMS = 200            # keys of one dict / items of one list kept
MAX_STRING = 4096          # characters of one string kept


def clean_text(s: str, limit: int = MAX_STRING) -> str:
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become '?'
    return s if len(s) <= limit else s[:limit] + "…"


def clean(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy: non-finite floats become None, text is storable, size bounded."""
    if value is None or isinstance(value, bool) or isinstance(value, int) and abs(value) < 2**63:
        return value
    if isinstance(value, int):  # beyond what either database's JSON round-trips exactly
        return str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean_text(value)
    if depth >= MAX_DEPTH:
        return None
    if isinstance(value, dict):
        return {clean_text(str(k), 200): clean(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, (list, tuple)):
        return [clean(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
    return clean_text(repr(value))


def bounded(value: dict | None, max_bytes: int, keep: tuple[str, ...] = ()) -> dict | None:
    """clean(value), then, if its JSON is still over max_bytes, only the `keep` keys
    (cleaned again with a tighter bound) and a note of what was dropped."""
    if value is None:
        return None
    out = clean(value)
    if not isinstance(out, dict):
        return {"value": out} if len(json.dumps(out)) <= max_bytes else {"truncated": True}
    if len(json.dumps(out)) <= max_bytes:
        return out
    small = {k: out[k] for k in keep if k in out}
    small["truncated"] = True
    while len(json.dumps(small)) > max_bytes and len(small) > 1:
        # Drop the largest kept value until it fits: the note itself always fits.
        biggest = max((k for k in small if k != "truncated"), key=lambda k: len(json.dumps(small[k])))
        del small[biggest]
    return small
