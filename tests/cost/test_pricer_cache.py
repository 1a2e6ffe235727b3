"""Pricer keeps estimates by what they depend on (service/cost/estimate.py inputs_of): a kept
estimate must equal a fresh one, each caller gets its own copy, and anything estimate() reads
must tell two jobs apart."""
from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

from service.cost import prices
from service.cost.estimate import Pricer, accrued, estimate
from tests.cost.conftest import TEST_PRICES

JOB = {"jobSpec": {"workerPoolSpecs": [
    {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
     "replicaCount": "1", "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}},
    {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2"}]}}


def _pricer(size: int = 256) -> Pricer:
    return Pricer(prices.load(TEST_PRICES), "us-central1", cache_size=size)


def test_a_kept_estimate_is_a_fresh_ones_copy():
    pricer = _pricer()
    first, second = pricer.estimate(JOB, "vertex"), pricer.estimate(JOB, "vertex")
    fresh = estimate(JOB, pricer.table, pricer.region, backend="vertex")
    assert first == second == fresh and first is not second
    assert second.exact_per_hour == fresh.exact_per_hour
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    first.accrued = accrued(first, start, start + timedelta(hours=2), start)   # what job_out does
    assert pricer.estimate(JOB, "vertex").accrued is None                       # not on the kept one


def test_every_input_of_an_estimate_tells_jobs_apart():
    pricer = _pricer()
    base = pricer.estimate(JOB, "vertex")
    changes = []
    for path, value in ((("workerPoolSpecs", 1, "replicaCount"), "4"),
                        (("workerPoolSpecs", 0, "machineSpec", "acceleratorCount"), 2),
                        (("workerPoolSpecs", 1, "machineSpec", "machineType"), "n1-standard-8"),
                        (("workerPoolSpecs", 0, "diskSpec", "bootDiskSizeGb"), 500),
                        (("scheduling",), {"strategy": "SPOT"}),
                        (("scheduling",), {"timeout": "3600s"})):
        job = copy.deepcopy(JOB)
        node = job["jobSpec"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        changed = pricer.estimate(job, "vertex")
        assert changed == estimate(job, pricer.table, pricer.region, backend="vertex")
        changes.append(changed != base)
    assert all(changes)
    assert pricer.estimate(JOB, "local").estimate_of != base.estimate_of   # the backend is an input too


def test_the_cache_is_bounded_and_can_be_off():
    pricer = _pricer(size=2)
    for n in range(1, 6):
        job = copy.deepcopy(JOB)
        job["jobSpec"]["workerPoolSpecs"][1]["replicaCount"] = str(n)
        pricer.estimate(job, "vertex")
    assert len(pricer._cache) == 2
    off = _pricer(size=0)
    assert off.estimate(JOB, "vertex") == _pricer().estimate(JOB, "vertex") and not off._cache
