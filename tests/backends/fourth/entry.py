"""The fourth backend's declaration: what a backend outside service/backends/ gives the
registry. Its one line elsewhere: `registry.register(entry(work_dir))` before the app is built
(the tests' fixture does it)."""
from __future__ import annotations

from pathlib import Path

from service.backends.registry import BackendEntry
from tests.backends.fourth.backend import FourthBackend, FourthSettings


def entry(work_dir: Path) -> BackendEntry[FourthSettings]:
    return BackendEntry(name="fourth", settings=lambda _service_settings: FourthSettings(work_dir),
                        factory=FourthBackend)
