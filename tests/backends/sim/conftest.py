"""The sim tests' shared fixture: the sim backend under two names (sim1, sim2), registered for
the test and taken out of the registry after it (bench/sim_cohorts.py)."""
from __future__ import annotations

import pytest

from bench.sim_cohorts import register
from service.backends import registry


@pytest.fixture
def cohorts():
    names = register(2)
    yield names
    for name in names:
        registry.unregister(name)
