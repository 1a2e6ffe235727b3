"""The per-team webhook limit's 409 counts in words: "your team has 1 webhook", not "1 webhooks"."""
from __future__ import annotations

from tests.apikit import assert_problem
from tests.webhooks.conftest import subscribe


def test_a_limit_of_one_says_one_webhook(make_client, receiver):
    client = make_client(run_reconciler=False, local_max_running_jobs=0, webhook_max_per_team=1)
    subscribe(client, receiver.url)
    problem = assert_problem(client.post("/v1/webhooks", json={"url": receiver.url}), 409)
    assert "your team has 1 webhook, the most TRAINJOBS_WEBHOOK_MAX_PER_TEAM allows (1)" in problem["detail"], problem
