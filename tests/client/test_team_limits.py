"""The client's team-limit methods against a real server."""
from __future__ import annotations

from decimal import Decimal

import pytest

from tests.client.conftest import replica_spec
from tests.conftest import ONE_DATABASE
from trainjobs_client import Conflict, InvalidRequest

pytestmark = ONE_DATABASE


def test_set_read_and_use_team_limits(tj):
    team = tj.whoami().team
    limits = tj.set_team_limits(team, max_concurrent_jobs=1, max_accelerators={"NVIDIA_TESLA_T4": 2},
                                max_monthly_spend="10")
    assert (limits.max_concurrent_jobs, limits.max_accelerators, limits.max_monthly_spend) == (
        1, {"NVIDIA_TESLA_T4": 2}, Decimal("10"))
    assert tj.team_limits(team) == limits
    usage = tj.team_usage(team)
    assert usage.jobs == 0 and {u.limit for u in usage.limits} >= {"max_concurrent_jobs", "max_monthly_spend"}


def test_preview_carries_the_estimate_and_a_refusal_is_a_conflict(tj, tmp_path):
    team = tj.whoami().team
    tj.templates.create("held", replica_spec("--wait-file", str(tmp_path / "never")))
    preview = tj.preview("held")
    assert preview.cost["currency"] and preview.cost["per_hour"] is not None
    tj.set_team_limits(team, max_concurrent_jobs=0)
    # 0 concurrent jobs: no job ever fits, so it is refused as invalid (422), not a conflict.
    with pytest.raises(InvalidRequest) as e:
        tj.submit("held")
    assert "max_concurrent_jobs" in str(e.value)
    tj.set_team_limits(team, max_concurrent_jobs=1)
    job = tj.submit("held")
    assert job.cost["per_hour"] is not None
    with pytest.raises(Conflict) as e:
        tj.submit("held")
    assert "max_concurrent_jobs" in str(e.value)
