"""Words around numbers and names in what people read (service/core/text.py: plural,
with_article): "1 core" and "2 cores", "an operator token", never "1 cores" or "a operator"."""
from __future__ import annotations

import pytest

from service.cli.client.follow import describe_event
from service.core.text import plural, with_article
from service.interop.aiplatform_config import convert
from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer, make_token


@pytest.mark.parametrize("n, one, many, said", [
    (1, "core", None, "1 core"), (2, "core", None, "2 cores"), (0, "job", None, "0 jobs"),
    (1, "worker replica", None, "1 worker replica"), (3, "process", "processes", "3 processes"),
    (1, "process", "processes", "1 process"), (-1, "step", None, "-1 steps")])
def test_plural(n, one, many, said):
    assert plural(n, one, many) == said


@pytest.mark.parametrize("word, said", [("operator", "an operator"), ("admin", "an admin"),
                                        ("member", "a member"), ("viewer", "a viewer"), ("Edge", "an Edge")])
def test_with_article(word, said):
    assert with_article(word) == said


def test_the_cli_says_one_epoch_and_one_step():
    assert describe_event({"event": "train_start", "epochs": 1}) == "training started: 1 epoch"
    assert describe_event({"event": "train_start", "epochs": 5}) == "training started: 5 epochs"
    assert describe_event({"event": "epoch_end", "epoch": 1, "epochs": 1, "steps": 1}) == "epoch 1/1 · 1 step"
    assert describe_event({"event": "epoch_end", "epoch": 2, "epochs": 3, "steps": 89}) == "epoch 2/3 · 89 steps"


def test_an_ai_platform_config_without_a_machine_type_counts_its_replicas():
    _, problems = convert({"trainingInput": {"scaleTier": "CUSTOM", "workerCount": 1, "parameterServerCount": 2}}, [])
    said = {p.message for p in problems}
    assert {"1 master replica needs a machine type", "1 worker replica needs a machine type",
            "2 parameterServer replicas need a machine type"} <= said, said


def test_a_role_missing_says_which_token_is_needed(client, db_url):
    member = bearer(make_token(db_url, "alpha", "member", name="m"))
    r = client.put("/v1/capacity/local", json={"resources": {"core": 1}}, headers=member)
    assert_problem(r, 403)
    assert "you need an operator token (made on the service's host: trainjobs tokens create --role operator)" \
        in r.json()["detail"], r.json()
    r = client.post("/v1/templates", json=DEMO, headers=member)
    assert_problem(r, 403)
    assert "you need an admin token" in r.json()["detail"], r.json()


def test_a_job_asking_one_core_more_than_there_is_says_one_core(client, db_url):
    operator = bearer(make_token(db_url, "ops", "operator"))
    assert client.put("/v1/capacity/local", json={"resources": {"core": 0}}, headers=operator).status_code == 200
    spec = {k: v for k, v in DEMO["spec"].items() if k != "workers"}
    spec["overridable"] = [o for o in spec["overridable"] if not o.startswith("workers.")]
    assert client.post("/v1/templates", json={**DEMO, "name": "solo", "spec": spec}).status_code == 201
    r = client.post("/v1/jobs", json={"template": "solo"})
    assert_problem(r, 422, "backend")
    assert "the job asks 1 core; backend local has 0 in all" in r.text, r.text
