"""Per-epoch history: what a backend's progress turns into rows, on SQLite and
PostgreSQL (whose json type refuses NaN and Infinity), bounded and sanitised;
and GET /v1/jobs/{id}/epochs."""
from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import select

from service.backends import progress as local_progress
from service.jobs.epochs import (
    EpochLimits,
    clean_metrics,
    list_epochs,
    listener,
    record_epoch,
)
from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Observation
from service.persistence.models import Job, JobEpoch
from tests.apikit import DEMO, assert_problem, settings, tokens  # noqa: F401
from tests.conftest import bearer, make_token


@pytest.fixture
def client(api_client, settings, tokens):  # noqa: F811
    with api_client(settings, tokens["admin"]) as c:
        yield c


@pytest.fixture
def job_id(client) -> str:
    assert client.post("/v1/templates", json=DEMO).status_code == 201
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _apply(session, obs):
    """Through the lifecycle engine, with the epoch history listening as in the app."""
    engine = Engine()
    engine.listen(listener(EpochLimits()))
    return engine.apply(session, obs)


def _uuid(job_id):
    import uuid
    return uuid.UUID(job_id)


def _epoch(n: int, **metrics) -> dict:
    return {"epoch": n, "steps": 10, "seconds": 1.5, "metrics": metrics or {"loss": 1.0 / n}}


def _rows(session_factory, job_id) -> dict[int, JobEpoch]:
    with session_factory() as s:
        return {r.epoch: r for r in list_epochs(s, _uuid(job_id))}


def test_several_epochs_between_two_polls_are_all_kept(session_factory, job_id):
    # The local backend reports only the last progress of a poll; its recent epochs ride along.
    progress = {"epoch": 3, "epochs": 3, "metrics": {"loss": 1 / 3}, "updated_at": "2026-01-01T00:00:03+00:00",
                "recent_epochs": [{**_epoch(1), "at": "2026-01-01T00:00:01+00:00"},
                                  {**_epoch(2), "at": "2026-01-01T00:00:02+00:00"},
                                  {**_epoch(3), "at": "2026-01-01T00:00:03+00:00"}]}
    with session_factory() as s:
        _apply(s, Observation(_uuid(job_id), progress=progress))
        s.commit()
    rows = _rows(session_factory, job_id)
    assert sorted(rows) == [1, 2, 3]
    assert rows[2].metrics == {"loss": 0.5} and rows[2].steps == 10 and rows[2].seconds == 1.5
    assert rows[1].at.isoformat() == "2026-01-01T00:00:01+00:00"


def test_an_epoch_reported_again_is_updated_not_duplicated(session_factory, job_id):
    with session_factory() as s:
        assert record_epoch(s, _uuid(job_id), _epoch(1, loss=0.9)) == 1
        s.commit()
        assert record_epoch(s, _uuid(job_id), _epoch(1, loss=0.9)) == 0   # nothing new
        assert record_epoch(s, _uuid(job_id), _epoch(1, loss=0.8)) == 1   # corrected
        s.commit()
    rows = _rows(session_factory, job_id)
    assert list(rows) == [1] and rows[1].metrics == {"loss": 0.8}


def test_non_finite_and_odd_values_are_stored_as_nulls_or_dropped(session_factory, job_id):
    metrics = {"loss": math.nan, "accuracy": math.inf, "val_loss": -math.inf, "huge": 10 ** 400, "big": 2 ** 60,
               "ok": 0.25, "flag": True, "text": "high", "nested": {"a": 1}, "": 1.0, "x" * 200: 1.0,
               "nul\x00name": 1.0, "none": None}
    with session_factory() as s:
        record_epoch(s, _uuid(job_id), {"epoch": 1, "metrics": metrics, "steps": math.nan, "seconds": -3})
        s.commit()  # PostgreSQL's json type refuses NaN: this commit is the proof
    row = _rows(session_factory, job_id)[1]
    assert row.metrics == {"loss": None, "accuracy": None, "val_loss": None, "huge": None,
                           "big": float(2 ** 60), "ok": 0.25, "none": None}
    assert row.steps is None and row.seconds is None


def test_a_huge_metrics_dict_is_cut_to_the_setting(session_factory, job_id):
    metrics = {f"m{i:04d}": float(i) for i in range(5000)}
    with session_factory() as s:
        record_epoch(s, _uuid(job_id), {"epoch": 1, "metrics": metrics}, EpochLimits(max_per_job=10, max_metrics=64))
        s.commit()
    assert list(_rows(session_factory, job_id)[1].metrics) == [f"m{i:04d}" for i in range(64)]


@pytest.mark.parametrize("bad", ["3", -1, 2 ** 40, True, None, 1.5, [1]])
def test_unusable_epoch_numbers_are_ignored(session_factory, job_id, bad):
    with session_factory() as s:
        assert record_epoch(s, _uuid(job_id), {"epoch": bad, "metrics": {"loss": 1.0}}) == 0
    assert _rows(session_factory, job_id) == {}


def test_each_job_keeps_only_its_latest_epochs(session_factory, job_id):
    limits = EpochLimits(max_per_job=5, max_metrics=64)
    with session_factory() as s:
        for n in range(1, 13):
            record_epoch(s, _uuid(job_id), _epoch(n), limits)
            s.commit()
    assert sorted(_rows(session_factory, job_id)) == [8, 9, 10, 11, 12]
    # A replica that jumps around cannot grow the table past the bound either.
    with session_factory() as s:
        for n in (10 ** 9, 2, 3, 10 ** 9 - 1):
            record_epoch(s, _uuid(job_id), _epoch(n), limits)
            s.commit()
    assert sorted(_rows(session_factory, job_id)) == [10 ** 9 - 1, 10 ** 9]


def test_the_bound_comes_from_the_setting(session_factory, job_id, monkeypatch):
    # The variable reaches record_epoch through the jobs slice the composition root cuts (the
    # controller's listener is handed it); nothing reads the environment behind its back.
    from service.slices import Settings, job_settings
    monkeypatch.setenv("TRAINJOBS_JOB_EPOCHS_MAX_PER_JOB", "2")
    limits = job_settings(Settings()).epochs
    with session_factory() as s:
        for n in (1, 2, 3):
            record_epoch(s, _uuid(job_id), _epoch(n), limits)
        s.commit()
    assert sorted(_rows(session_factory, job_id)) == [2, 3]


def test_not_a_progress_dict_records_nothing(session_factory, job_id):
    with session_factory() as s:
        for junk in (None, [], "epoch 3", {"recent_epochs": "x"}, {"recent_epochs": [1, "a", None]}):
            assert record_epoch(s, _uuid(job_id), junk) == 0


def test_clean_metrics_keeps_numbers_only():
    assert clean_metrics({"a": 1, "b": 2.5, "c": "x", "d": False, 5: 1.0}, 10) == {"a": 1, "b": 2.5}
    assert clean_metrics(["not", "a", "dict"], 10) == {}


# --- the local backend's progress lines ------------------------------------------------

def test_local_progress_reads_nan_and_infinity_as_null_and_keeps_recent_epochs():
    p = None
    for e in range(1, 25):
        line = ('{"event": "epoch_end", "epoch": %d, "epochs": 24, "steps": 5, "seconds": 0.5, '
                '"metrics": {"loss": NaN, "accuracy": Infinity, "val_loss": -Infinity, "x": 1e999, "y": %d.5}}' % (e, e))
        p = local_progress.update(p, line, f"2026-01-01T00:00:{e:02d}+00:00", "chief")
    assert p["epoch"] == 24 and p["metrics"] == {"loss": None, "accuracy": None, "val_loss": None, "x": None,
                                                  "y": 24.5}
    recent = p["recent_epochs"]
    assert [r["epoch"] for r in recent] == list(range(25 - local_progress.RECENT_EPOCHS, 25))
    assert recent[-1] == {"epoch": 24, "steps": 5, "seconds": 0.5, "metrics": p["metrics"],
                          "at": "2026-01-01T00:00:24+00:00"}
    json.dumps(p, allow_nan=False)  # storable as strict JSON


def test_local_progress_survives_hostile_lines():
    deep = '{"event": "epoch_end", "epoch": 1, "metrics": ' + "[" * 100000 + "]" * 100000 + "}"
    assert local_progress.update(None, deep, "t", "chief") is None
    assert local_progress.update(None, '{"event": "epoch_end", "epoch": 1e999}', "t", "chief")["epoch"] is None


def test_progress_with_nan_reaches_the_database_through_the_reconciler_path(session_factory, job_id):
    line = '{"event": "epoch_end", "epoch": 1, "epochs": 2, "metrics": {"loss": NaN, "accuracy": 0.5}}'
    p = local_progress.update(None, line, "2026-01-01T00:00:01+00:00", "chief")
    with session_factory() as s:
        _apply(s, Observation(_uuid(job_id), progress=p))
        s.commit()
        stored = s.scalar(select(Job.progress).where(Job.id == _uuid(job_id)))
    assert stored["metrics"] == {"loss": None, "accuracy": 0.5}
    assert _rows(session_factory, job_id)[1].metrics == {"loss": None, "accuracy": 0.5}


# --- GET /v1/jobs/{id}/epochs ----------------------------------------------------------

def test_epochs_api_pages_and_is_team_scoped(client, session_factory, job_id, db_url, tokens):  # noqa: F811
    with session_factory() as s:
        for n in range(1, 6):
            record_epoch(s, _uuid(job_id), _epoch(n, loss=1.0 / n, accuracy=n / 10))
        s.commit()
    viewer = bearer(tokens["viewer"])
    r = client.get(f"/v1/jobs/{job_id}/epochs", headers=viewer)
    assert r.status_code == 200
    body = r.json()
    assert [e["epoch"] for e in body["items"]] == [1, 2, 3, 4, 5] and body["next_after"] is None
    assert body["items"][1]["metrics"] == {"accuracy": 0.2, "loss": 0.5}
    assert body["items"][0]["steps"] == 10 and body["items"][0]["seconds"] == 1.5

    page = client.get(f"/v1/jobs/{job_id}/epochs?limit=2&after=1", headers=viewer).json()
    assert [e["epoch"] for e in page["items"]] == [2, 3] and page["next_after"] == 3

    other = bearer(make_token(db_url, "beta", "admin"))
    assert_problem(client.get(f"/v1/jobs/{job_id}/epochs", headers=other), 404)
    assert_problem(client.get(f"/v1/jobs/{job_id}/epochs", headers={"Authorization": ""}), 401)
    assert_problem(client.get(f"/v1/jobs/{job_id}/epochs?limit=0"), 422, "query.limit")
    assert_problem(client.get("/v1/jobs/not-a-uuid/epochs"), 422)
