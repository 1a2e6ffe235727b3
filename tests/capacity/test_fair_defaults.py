"""Issue 47: the queue is fair at its defaults and under attack, through the real controller on
the sim backend (a job is a timer: no process), on SQLite and PostgreSQL.

1. No capacity set, one launch slot: a team that queued one job behind another team's twelve
   gets the slot next, whatever the teams' names (it used to wait behind all of them when its
   name sorted later).
2. Launch slots are capacity: a team inside its nominal quota reclaims a slot a borrower holds.
3. A borrowed job is reclaimed however often it was preempted before."""
from __future__ import annotations

import uuid

from sqlalchemy import select, update

from service.auth.service import get_or_create_team
from service.persistence.models import Job, TeamShare
from service.persistence.session import make_engine, make_session_factory
from tests.backends.conftest import token  # noqa: F401 (a fixture)
from tests.backends.localkit import Api
from tests.backends.sim.simkit import As, settings, submit, template
from tests.conftest import make_token
from tests.waiting import wait_for


def _teams(api_client, db_url, token, **overrides) -> tuple[Api, Api]:
    """alpha (the default token's team) and zulu, whose name sorts last. At speed 5 a job of a
    second takes 0.2 s (the first test runs six of them one after another): what these tests
    prove is the order and the preemptions, not how long a job runs."""
    zulu = make_token(db_url, "zulu", "admin")
    client = api_client(settings(db_url, **{"sim_speed": 5.0, **overrides}), token)
    alpha, other = Api(client), Api(client)
    other.c = As(client, zulu)
    return alpha, other


def _db(db_url: str, fn) -> None:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            fn(session)
            session.commit()
    finally:
        engine.dispose()


def _shares(db_url: str, nominal: dict[str, dict[str, int]]) -> None:
    def write(session):
        for name, quota in nominal.items():
            team = get_or_create_team(session, name)
            session.add(TeamShare(team_id=team.id, backend="sim", nominal=quota, borrowing_limit={},
                                  lending_limit={}, weight=1.0))
    _db(db_url, write)


def _started(api: Api, job_id: str) -> str:
    return api.wait_state(job_id, "SUCCEEDED", "FAILED", timeout=120)["started_at"]


def test_with_nothing_configured_a_team_gets_the_next_slot_whatever_its_name(api_client, db_url, token):
    alpha, zulu = _teams(api_client, db_url, token, sim_max_running_jobs=1)
    template(alpha, "long", {"sim-duration-seconds": "3600"})
    template(alpha, "short", {"sim-duration-seconds": "1"})
    template(zulu, "short", {"sim-duration-seconds": "1"})
    first = submit(alpha, "long")["id"]
    alpha.wait_state(first, "RUNNING")
    mine = [submit(alpha, "short")["id"] for _ in range(5)]
    theirs = submit(zulu, "short")["id"]

    def place():     # the queue is computed at most every TRAINJOBS_QUEUE_CACHE_SECONDS
        queue = next(q for q in zulu.c.get("/v1/queue").json()["items"] if q["backend"] == "sim")
        return next((e for e in queue["waiting"] if e.get("id") == theirs), None)
    entry = wait_for(place, "zulu's job in the queue")
    assert entry["position"] == 1 and "every launch slot is taken" in entry["why"], entry
    assert alpha.c.post(f"/v1/jobs/{first}/cancel").status_code == 202     # the slot frees
    starts = sorted((_started(alpha if j in mine else zulu, j), j) for j in mine + [theirs])
    # Team zulu runs nothing and alpha ran last: zulu's job is the first to start, not the sixth.
    assert [j for _, j in starts].index(theirs) == 0, starts


def test_a_team_inside_its_nominal_quota_reclaims_a_launch_slot(api_client, db_url, token):
    _shares(db_url, {"alpha": {"core": 1}, "zulu": {"core": 1}})
    alpha, zulu = _teams(api_client, db_url, token, capacity={"sim": {"core": 4}}, sim_max_running_jobs=2)
    template(alpha, "long", {"sim-duration-seconds": "3600"})
    template(zulu, "short", {"sim-duration-seconds": "1"})
    # One after the other: two jobs started by one pass are as young as each other (one launch
    # time), and which of them is "the younger" would then be a coin's toss.
    held = []
    for _ in range(2):
        held.append(submit(alpha, "long")["id"])
        alpha.wait_state(held[-1], "RUNNING")
    # Two of four cores in use, but both slots taken: one of alpha's jobs borrows (its nominal is 1).
    theirs = submit(zulu, "short")["id"]
    assert zulu.wait_state(theirs, "SUCCEEDED", "FAILED", timeout=60)["state"] == "SUCCEEDED"
    ended = [alpha.job(j) for j in held]
    preempted = [j for j in ended if j["state"] == "FAILED"]
    assert len(preempted) == 1 and preempted[0]["error"]["kind"] == "reclaim", ended
    assert preempted[0]["id"] == held[1]        # the younger, borrowed one


def test_a_borrowed_job_preempted_three_times_is_still_reclaimed(api_client, db_url, token):
    _shares(db_url, {"zulu": {"core": 1}})
    alpha, zulu = _teams(api_client, db_url, token, capacity={"sim": {"core": 1}})
    template(alpha, "long", {"sim-duration-seconds": "3600"})
    template(zulu, "short", {"sim-duration-seconds": "1"})
    borrower = submit(alpha, "long")["id"]
    alpha.wait_state(borrower, "RUNNING")
    # Its attempts were preempted as often as TRAINJOBS_MAX_PREEMPTIONS_PER_JOB allows (3).
    _db(db_url, lambda s: s.execute(update(Job).where(Job.id == uuid.UUID(borrower)).values(preemptions=3)))
    theirs = submit(zulu, "short")["id"]
    assert zulu.wait_state(theirs, "SUCCEEDED", "FAILED", timeout=60)["state"] == "SUCCEEDED"
    err = alpha.job(borrower)["error"]
    assert err["cause"] == "preemption" and err["kind"] == "reclaim", err
    with alpha.c.app.state.services.session_factory() as session:
        again = session.execute(select(Job.preemptions).where(Job.retry_of == uuid.UUID(borrower))).scalar_one()
    assert again == 4      # a new attempt all the same: it resumes from its checkpoint
