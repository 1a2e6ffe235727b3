"""Text the databases cannot store: NUL characters (PostgreSQL refuses them) and
unpaired UTF-16 surrogates (JSON's \\udxxx escapes allow them; UTF-8 does not)."""
from __future__ import annotations

from typing import Any


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
