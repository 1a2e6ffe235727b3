"""A backend package's names loaded on first use (PEP 562): the composition root imports every
packaged backend's entry.py and settings.py (their declarations), and that must not load a
backend's code, nor Google's client libraries, where the backend is not enabled."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def names(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The package's module `__getattr__`: each name of `homes` from its module, imported then."""
    def __getattr__(name: str) -> Any:
        if name in homes:
            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__
