"""`trainjobs teams set-limits|limits|usage` as a real subprocess against a real service."""
from __future__ import annotations

import json

from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE


def test_set_show_and_use_limits(cli):
    r = cli("teams", "set-limits", "--max-jobs", "3", "--max-accelerators", "NVIDIA_TESLA_T4=2",
            "--max-monthly-spend", "12.50", "--on-exceed", "queue")
    assert r.returncode == 0, r.stderr
    assert "team alpha (on_exceed: queue)" in r.stdout and "NVIDIA_TESLA_T4=2" in r.stdout
    shown = json.loads(cli("teams", "limits", "-o", "json").stdout)
    assert (shown["max_concurrent_jobs"], shown["max_accelerators"], shown["max_monthly_spend"]) == (
        3, {"NVIDIA_TESLA_T4": 2}, "12.500000")
    usage = cli("teams", "usage")
    assert usage.returncode == 0, usage.stderr
    assert "max_concurrent_jobs" in usage.stdout and "0 of 3" in usage.stdout and "estimate" in usage.stdout.lower()


def test_bad_input_is_a_clear_error(cli):
    r = cli("teams", "set-limits", "--max-accelerators", "NVIDIA_TESLA_T4=two")
    assert r.returncode != 0 and "whole number" in r.stderr
    r = cli("teams", "limits", "--team", "beta")
    assert r.returncode != 0 and "beta" in r.stderr
