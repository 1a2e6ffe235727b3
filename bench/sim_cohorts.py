"""The sim backend under several names (sim1, sim2, ...): Kueue's cohorts, one backend each.

A plugin in the registry's sense (docs/DESIGN.md, "The backend registry"): it calls
`registry.register` for each name before the app is built, with the sim's own settings slice
(the TRAINJOBS_SIM_* variables, shared by every copy) and a factory that names the backend it
builds. Each copy is a SimBackend of its own (its own stops, its own passes); the controller runs
one loop per name, and each name has its own capacity (TRAINJOBS_CAPACITY='{"sim1": {...}}').

Run a service with them (one process: the registrations live in this interpreter, so
`--workers 1`; uvicorn's worker processes would import the app without them):

    TRAINJOBS_BACKENDS='["sim1","sim2"]' TRAINJOBS_DEFAULT_BACKEND=sim1 \\
        .venv/bin/python bench/sim_cohorts.py 2 serve --port 8000 --workers 1
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.backends import registry
from service.backends.sim.entry import sim_settings_of


def _factory(name: str):
    def build(settings: Any):
        from service.backends.sim.backend import SimBackend

        backend = SimBackend(settings)
        backend.name = name   # the class says "sim"; the instance answers to its registered name
        return backend
    return build


_entries: dict[str, registry.BackendEntry] = {}


def register(count: int) -> list[str]:
    """sim1 .. sim<count>, each registered once (the same entry again is harmless to the registry)."""
    names = [f"sim{i}" for i in range(1, count + 1)]
    for name in names:
        entry = _entries.setdefault(name, registry.BackendEntry(name=name, settings=sim_settings_of,
                                                                factory=_factory(name)))
        registry.register(entry)
    return names


if __name__ == "__main__":
    register(int(sys.argv[1]))
    from service.cli.main import main

    sys.exit(main(sys.argv[2:]))
