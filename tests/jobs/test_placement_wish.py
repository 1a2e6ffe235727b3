"""A job's placement wish resolved at submit (service/jobs/placement_wish.py): its deadline as a
time, and its price per hour on each backend: the operator's prices, else Vertex AI's list price."""
from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from service.capacity.placement import Placed
from service.cli.client.render import _wish_text
from service.cost.estimate import Pricer
from service.cost.prices import load as load_prices
from service.jobs.placement_wish import resolve
from service.jobspec.compile import compile_spec
from service.jobspec.spec import JobSpec
from service.scheduling.model import SLOT

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
PRICER = Pricer(load_prices(None), "us-central1")
BACKENDS = {"vertex": SimpleNamespace(capabilities=SimpleNamespace(runs_on=None)),
            "slurm": SimpleNamespace(capabilities=SimpleNamespace(runs_on="a Slurm cluster")),
            "local": SimpleNamespace(capabilities=SimpleNamespace(runs_on="this machine"))}
PLACED = (("vertex", Placed({"vcpu": 4})), ("slurm", Placed({"core": 4, SLOT: 1})), ("local", Placed({"core": 4})))


def _compiled(placement: dict | None):
    spec = JobSpec.model_validate({"container": {"image_uri": "trainer:1"}, "chief": {"machine_type": "n1-standard-4"},
                                   "backends": ["vertex", "slurm", "local"], "placement": placement})
    return compile_spec(spec, display_name="j", labels={})


def test_prices_from_the_operator_and_from_vertexs_list_prices():
    # Slurm: 4 cores at 0.1 (a launch slot is no resource one pays for); local: no price.
    compiled = _compiled({"prefer": "cheapest"})
    wish, problems = resolve(compiled, PLACED, BACKENDS, {"slurm": {"core": 0.1, SLOT: 5.0}}, PRICER, NOW, 86_400)
    vertex = float(PRICER.estimate(compiled.custom_job_dict, "vertex").per_hour)
    assert problems == [] and vertex > 0
    assert wish == {"prefer": "cheapest", "start_by": None, "prices": {"vertex": vertex, "slurm": 0.4, "local": None}}


def test_start_by_resolved_and_bounded():
    wish, problems = resolve(_compiled({"start_by": 600}), PLACED, BACKENDS, {}, PRICER, NOW, 86_400)
    assert problems == [] and wish is not None and wish["start_by"] == NOW.timestamp() + 600
    wish, _ = resolve(_compiled({"start_by": "2026-11-29T08:00:00+01:00"}), PLACED, BACKENDS, {}, PRICER, NOW, 86_400)
    assert wish is not None and wish["start_by"] == NOW.timestamp() + 3600
    for late in ("2026-11-29T05:59:00Z", 86_401):
        wish, problems = resolve(_compiled({"start_by": late}), PLACED, BACKENDS, {}, PRICER, NOW, 86_400)
        assert wish is None and [p.field for p in problems] == ["placement.start_by"]


def test_the_cli_shows_the_wish_in_a_line():
    wish = {"prefer": "cheapest", "start_by": "2026-12-01T09:00:00Z", "prices": {"sim2": 0.1, "sim1": None}}
    assert _wish_text(wish) == "cheapest, start by 2026-12-01T09:00:00Z; sim2 0.10/h, sim1 no price"


def test_nothing_kept_for_the_listed_order_or_one_backend():
    assert resolve(_compiled({"prefer": "listed"}), PLACED, BACKENDS, {}, PRICER, NOW, 86_400) == (None, [])
    assert resolve(_compiled({"prefer": "cheapest"}), PLACED[:1], BACKENDS, {}, PRICER, NOW, 86_400) == (None, [])


@pytest.mark.parametrize("seconds", [-5, 0, 0.5, 90.5])
def test_seconds_below_one_or_in_fractions_are_refused_not_read_as_a_unix_time(seconds):
    with pytest.raises(ValidationError, match="whole number of seconds from the submit"):
        _compiled({"start_by": seconds})
