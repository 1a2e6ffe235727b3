"""GET /v1/queue and a waiting job's `queue` in GET /v1/jobs/{id}: the planner's order and
why, each team's use, and another team's jobs shown without id or name (SQLite and PostgreSQL)."""
from __future__ import annotations

import pytest

from service.slices import Settings
from tests.apikit import assert_problem
from tests.capacity.queuekit import add_template, set_capacity, set_share, shape, submit
from tests.conftest import bearer, make_token
from tests.waiting import wait_for


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    # No controller runs: jobs stay QUEUED; the queue is computed afresh on every read unless a
    # test says otherwise. Launch slots to spare: the order is the planner's alone.
    return Settings(database_url=db_url, backends=["local"], local_work_dir=tmp_path / "runs",
                    local_max_running_jobs=8, run_reconciler=False, seed_demo_template=False,
                    queue_cache_seconds=0)


@pytest.fixture
def beta(db_url) -> dict:
    return bearer(make_token(db_url, "beta", "admin"))


@pytest.fixture
def scene(client, demo, db_url, beta) -> dict:
    """local has 2 cores, all held by beta's running job; beta's B2 waits (oldest), then
    alpha's A1 and A2 (A2 of a higher priority). Alpha uses nothing, so alpha goes first,
    A2 before A1; beta's B2 last."""
    add_template(client, beta)
    set_capacity(db_url, "local", {"core": 2})
    set_share(db_url, "alpha", "local", {"core": 1}, weight=2.0)
    b1 = submit(client, "beta-running", beta)
    shape(db_url, b1, demand={"core": 2}, running=True)
    b2 = submit(client, "beta-secret-plan", beta)
    shape(db_url, b2, demand={"core": 1})
    a1 = submit(client, "alpha-low")
    shape(db_url, a1, demand={"core": 1})
    a2 = submit(client, "alpha-urgent")
    shape(db_url, a2, demand={"core": 1}, priority=5)
    return {"b1": b1, "b2": b2, "a1": a1, "a2": a2}


def _local(body: dict) -> dict:
    [only] = body["items"]
    assert only["backend"] == "local"
    return only


def test_queue_in_order_with_why_and_use_per_team(client, scene):
    r = client.get("/v1/queue", params={"backend": "local"})
    assert r.status_code == 200, r.text
    q = _local(r.json())
    assert (q["capacity"], q["capacity_source"], q["in_use"], q["free"]) == ({"core": 2}, "api", {"core": 2}, {"core": 0})
    assert (q["running_jobs"], q["waiting_jobs"], q["starting_jobs"], q["waiting_truncated"]) == (1, 3, 0, False)
    teams = {t["team"]: t for t in q["teams"]}
    assert teams["beta"]["use"] == {"core": 2} and teams["beta"]["borrowed"] == {"core": 2}
    assert (teams["beta"]["running_jobs"], teams["beta"]["waiting_jobs"], teams["beta"]["has_share"]) == (1, 1, False)
    assert teams["alpha"]["nominal"] == {"core": 1} and teams["alpha"]["weight"] == 2.0
    assert (teams["alpha"]["use"], teams["alpha"]["borrowed"], teams["alpha"]["waiting_jobs"]) == ({}, {}, 2)
    w = q["waiting"]
    # The predicted start order (issue 49.1): beta's borrowed job is preempted and alpha's urgent
    # job starts inside its nominal quota; beta's job comes back first in beta's line, does not fit
    # beside it and keeps the core that frees (backfill: TRAINJOBS_SCHEDULER_RESERVATIONS), so
    # beta's waiting job does not take that core; once beta's job has run, alpha's second job goes
    # first, inside alpha's quota again.
    assert [(e["position"], e["team"], e.get("id")) for e in w] == [
        (1, "alpha", scene["a2"]), (2, "alpha", scene["a1"]), (3, "beta", None)]
    first = w[0]
    assert first["display_name"] == "alpha-urgent" and first["priority"] == 5 and first["demand"] == {"core": 1}
    assert first["ahead"] == 0 and "needs 1 core, 0 free" in first["why"] and "next in line" in first["why"]
    assert "1 job ahead" in w[1]["why"] and w[1]["ahead"] == 1
    # Likely start (the play) and at the latest (time limits): labelled, never the latter first.
    assert first["likely_start"] is not None and first["estimated_start"] is not None
    assert first["likely_start"] <= first["estimated_start"]
    assert q["next_offset"] is None


def test_another_teams_jobs_show_no_id_no_name_no_why(client, scene, beta, db_url):
    """Attack as a hostile member of alpha: nothing of beta's jobs but team, place, priority,
    demand; and beta, reading the same queue, sees none of alpha's ids or names."""
    member = bearer(make_token(db_url, "alpha", "viewer", "nosy"))
    for headers, theirs, secrets in ((member, "beta", (scene["b1"], scene["b2"], "beta-secret-plan", "beta-running")),
                                     (beta, "alpha", (scene["a1"], scene["a2"], "alpha-urgent", "alpha-low"))):
        r = client.get("/v1/queue", headers=headers)
        assert r.status_code == 200, r.text
        for secret in secrets:
            assert secret not in r.text
        shown = [e for e in _local(r.json())["waiting"] if e["team"] == theirs]
        assert shown
        for e in shown:
            assert {k for k, v in e.items() if v is not None} == {"position", "team", "priority", "demand", "factors"}
            # Its parts only as far as the queue shows them already: its team's fair share (the team's
            # use and share are shown), priority and size (its demand and the capacity are shown).
            assert {k for k, v in e["factors"].items() if v is not None} == {"fair_share", "priority", "size"}
    # Nor can beta read alpha's waiting job (or its place) through the job view.
    assert_problem(client.get(f"/v1/jobs/{scene['a1']}", headers=beta), 404)


def test_a_waiting_jobs_view_says_its_place(client, scene, beta):
    job = client.get(f"/v1/jobs/{scene['a1']}").json()
    assert job["state"] == "QUEUED"
    assert job["queue"]["position"] == 2 and job["queue"]["ahead"] == 1
    assert "needs 1 core, 0 free" in job["queue"]["why"]
    mine = client.get(f"/v1/jobs/{scene['b2']}", headers=beta).json()["queue"]
    assert mine["position"] == 3 and "2 jobs ahead" in mine["why"] and mine["likely_start"] is not None
    # A running job has no place in the queue.
    assert client.get(f"/v1/jobs/{scene['b1']}", headers=beta).json()["queue"] is None


def test_each_waiting_job_has_its_priority_in_parts(client, scene):
    """Issue 52.4, "why this job and not mine": the tier the scheduler takes the job in, then its
    team's fair share, its priority, its age and its size, and the part that put the job ahead of
    it there. Alpha's urgent job keeps alpha inside its nominal quota (tier nominal); so does
    alpha's second job as things stand now; beta's job is in the fair tier."""
    w = _local(client.get("/v1/queue", params={"backend": "local"}).json())["waiting"]
    order = [e["id"] or e["team"] for e in w]
    parts = dict(zip(order, (e["factors"] for e in w), strict=True))
    urgent, low, theirs = parts[scene["a2"]], parts[scene["a1"]], parts["beta"]
    assert order[0] == scene["a2"]
    assert (urgent["tier"], urgent["decided_by"], urgent["priority"], urgent["size"]) == ("nominal", None, 5, 0.5)
    assert urgent["priority_class"] is None and urgent["waited_seconds"] >= 0
    assert urgent["fair_share"] == {"rank": 1, "borrowed": 0.0, "held": 0.0, "running_jobs": 0.0, "weight": 2.0,
                                   "usage": None}
    # Beta borrows both cores: its standing is second, all it holds beyond its (empty) quota.
    assert theirs["fair_share"] == {"rank": 2, "borrowed": 1.0, "held": 1.0, "running_jobs": 1.0, "weight": 1.0,
                                   "usage": None}
    assert low["tier"] == "nominal"
    # What put the job ahead of alpha's second job there, whichever the play starts before it:
    # alpha's urgent job by its priority, or beta's, which the play starts first although as
    # things stand now alpha's second job would go first (its tier).
    assert low["decided_by"] == ("priority" if order == [scene["a2"], scene["a1"], "beta"] else "forecast"), order
    # The job view says the same (computed again here: no cache in these tests, so it waited longer).
    viewed = client.get(f"/v1/jobs/{scene['a1']}").json()["queue"]["factors"]
    assert viewed.pop("waited_seconds") >= low.pop("waited_seconds") and viewed == low


def test_another_teams_job_ahead_decided_by_its_tier(client, scene, beta):
    """Beta's job, in the fair tier, waits behind alpha's, which keep alpha inside its quota: the
    tier decided; beta reads that, and none of alpha's jobs' own figures (tier, age)."""
    w = _local(client.get("/v1/queue", headers=beta).json())["waiting"]
    [i] = [i for i, e in enumerate(w) if e["id"] == scene["b2"]]
    mine, ahead = w[i]["factors"], w[i - 1]["factors"]
    assert i > 0 and mine["tier"] == "fair" and mine["decided_by"] == "tier"
    assert ahead["tier"] is None and ahead["waited_seconds"] is None and ahead["decided_by"] is None


def test_a_job_that_fits_is_about_to_start(client, demo, db_url):
    set_capacity(db_url, "local", {"core": 4})
    a = submit(client, "fits")
    shape(db_url, a, demand={"core": 2})
    q = _local(client.get("/v1/queue").json())
    assert q["starting_jobs"] == 1 and q["waiting"][0]["position"] == 0
    assert q["waiting"][0]["why"].startswith("about to start: fits")
    assert client.get(f"/v1/jobs/{a}").json()["queue"]["position"] == 0


def test_jobs_that_fit_beyond_the_launch_slots_wait_for_one(api_client, settings, tokens, db_url):
    """The controller launches the plan's first `free` jobs (its backend's max running jobs):
    the queue says so, instead of "about to start" for every job that fits."""
    with api_client(settings.model_copy(update={"local_max_running_jobs": 2}), tokens["admin"]) as c:
        add_template(c, {})
        set_capacity(db_url, "local", {"core": 8})
        running = submit(c, "running")
        shape(db_url, running, demand={"core": 1}, running=True)
        ids = [submit(c, f"fits-{i}") for i in range(3)]
        for i in ids:
            shape(db_url, i, demand={"core": 1})
        q = _local(c.get("/v1/queue").json())
        assert q["starting_jobs"] == 1 and q["free"] == {"core": 7}
        assert [(e["id"], e["position"], e["ahead"]) for e in q["waiting"]] == [
            (ids[0], 0, 0), (ids[1], 1, 0), (ids[2], 2, 1)]
        assert q["waiting"][0]["why"].startswith("about to start")
        # The scheduler arbitrates the launch slots itself (issue 47.2): the jobs that fit the
        # cores but find no slot wait for one, in the order they will get it.
        assert q["waiting"][1]["why"] == ("every launch slot is taken (0 of 2 free: the backend runs at most 2 jobs "
                                          "at once); next in line")
        assert q["waiting"][2]["why"].startswith("every launch slot is taken") and q["waiting"][2]["why"].endswith(
            "1 job ahead")
        assert c.get(f"/v1/jobs/{ids[2]}").json()["queue"]["position"] == 2


def test_a_backend_that_launches_nothing_says_so(api_client, settings, tokens):
    with api_client(settings.model_copy(update={"local_max_running_jobs": 0}), tokens["admin"]) as c:
        add_template(c, {})
        a = submit(c, "held")
        q = _local(c.get("/v1/queue").json())
        assert q["starting_jobs"] == 0
        assert [(e["id"], e["position"]) for e in q["waiting"]] == [(a, 1)]
        assert "launches no job: its limit on running jobs is 0" in q["waiting"][0]["why"]


def test_no_capacity_nothing_arbitrated(client, demo):
    a = submit(client, "anything")
    q = _local(client.get("/v1/queue").json())
    assert (q["capacity"], q["capacity_source"], q["free"]) == ({}, "none", {})
    assert [e["id"] for e in q["waiting"]] == [a]


def test_limit_and_offset_page_the_waiting_jobs_counts_complete(client, scene):
    first = _local(client.get("/v1/queue", params={"limit": 2}).json())
    assert first["waiting_jobs"] == 3 and len(first["waiting"]) == 2 and first["next_offset"] == 2
    rest = _local(client.get("/v1/queue", params={"limit": 2, "offset": 2}).json())
    assert [e["position"] for e in rest["waiting"]] == [3] and rest["next_offset"] is None
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}):
        assert_problem(client.get("/v1/queue", params=bad), 422)


def test_a_backend_not_enabled_is_a_404_naming_the_enabled(client):
    body = assert_problem(client.get("/v1/queue", params={"backend": "vertex"}), 404, "backend")
    assert "'vertex' is not enabled" in body["detail"] and "local" in body["detail"]
    assert body["enabled"] == ["local"]
    assert_problem(client.get("/v1/queue", params={"backend": "x" * 65}), 422)


def test_needs_a_token(client):
    r = client.get("/v1/queue", headers={"Authorization": "Bearer nope"})
    assert_problem(r, 401)


def test_reads_share_one_cached_computation_and_other_views_compute_nothing(api_client, settings, tokens, db_url):
    cached = settings.model_copy(update={"queue_cache_seconds": 60})
    with api_client(cached, tokens["admin"]) as c:
        add_template(c, {})
        a = submit(c, "waits")
        r = submit(c, "runs")
        shape(db_url, r, demand={"core": 1}, running=True)
        cache = c.app.state.services.queue
        assert c.get(f"/v1/jobs/{r}").json()["queue"] is None
        assert cache.computations == 0           # a job that does not wait costs no computation
        assert c.get(f"/v1/jobs/{a}").json()["queue"]["position"] == 0
        assert _local(c.get("/v1/queue").json())["waiting_jobs"] == 1
        submit(c, "later")
        assert _local(c.get("/v1/queue").json())["waiting_jobs"] == 1   # the kept computation
        assert cache.computations == 1


def test_a_teams_past_use_is_in_its_fair_share(client, scene, tokens, session_factory):
    """Issue 52.3's memory in 52.4's parts: beta ran 2 cores for two hours this morning, alpha
    nothing; once the usage ledger is folded, beta's fair share says its part of every team's past
    use (all of it) and alpha's none, each added to what the team borrows and holds now."""
    from service.core.clock import utcnow
    from tests.usage.usagekit import fold_at, hours_ago, ran

    now = utcnow()
    ran(client, tokens["admin"], session_factory, start=hours_ago(now, 3), end=hours_ago(now, 1), demand={"core": 2},
        team="beta")
    fold_at(session_factory, now)
    w = _local(client.get("/v1/queue", params={"backend": "local"}).json())["waiting"]
    shares = {e["team"]: e["factors"]["fair_share"] for e in w}
    assert (shares["alpha"]["usage"], shares["beta"]["usage"]) == (0.0, 1.0)
    assert (shares["beta"]["borrowed"], shares["beta"]["held"]) == (2.0, 2.0)      # 1.0 now + 1.0 past, weight 1


def _team_id(session_factory, name: str):
    from sqlalchemy import select

    from service.persistence.models import Team
    with session_factory() as session:
        return session.execute(select(Team.id).where(Team.name == name)).scalar_one()


def _computed_like(cache, session_factory, backend: str):
    """The served computation's queue as queue.py's models build it: the same rows read again here,
    decided at the served one's instant (the worker sends ready bytes, not its Computed)."""
    from service.capacity.queue import Computed
    at = cache.prepared(backend).computed_at
    with session_factory() as session:
        snap = cache.planner.snapshot(session, backend, slots=cache.slots(backend), forecast=True)
    return Computed.of(snap, cache.planner.decide(snap, at), at, cache.planner.policy)


def test_the_ready_pages_say_what_the_models_say(api_client, settings, tokens, scene, beta, db_url, session_factory):
    """GET /v1/queue answers from JSON made once per computation (capacity/queue_pages.py): for
    each caller and page it is what queue.view's models give, own jobs whole, others' redacted."""
    from service.capacity import queue
    from service.capacity.queue_schemas import BackendQueue, QueueList
    assert list(BackendQueue.model_fields)[-2:] == ["waiting", "next_offset"]    # the ready head stops before them
    member = bearer(make_token(db_url, "alpha", "viewer", "nosy"))
    with api_client(settings.model_copy(update={"queue_cache_seconds": 60}), tokens["admin"]) as c:
        svc = c.app.state.services
        for headers, team in ((member, "alpha"), (beta, "beta")):
            for limit, offset in ((1000, 0), (1, 0), (1, 1), (2, 1), (1, 2), (5, 3), (1, 99)):
                r = c.get("/v1/queue", params={"limit": limit, "offset": offset}, headers=headers)
                assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
                computed = _computed_like(svc.queue, session_factory, "local")
                with session_factory() as session:
                    want = QueueList(items=[queue.view(session, computed, team, _team_id(session_factory, team),
                                                       limit=limit, offset=offset, max_waiting=20_000)])
                assert r.content == want.model_dump_json().encode(), (team, limit, offset)    # byte for byte
        assert svc.queue.computations == 1


def test_the_queue_follows_new_jobs_and_its_thread_ends_with_the_app(api_client, settings, tokens):
    """A short TTL: a new waiting job shows once a read after it finds the queue stale (the next
    computation, made by the queue's thread); the thread stops with the app."""
    with api_client(settings.model_copy(update={"queue_cache_seconds": 0.2}), tokens["admin"]) as c:
        add_template(c, {})
        submit(c, "first")
        assert _local(c.get("/v1/queue").json())["waiting_jobs"] == 1
        cache = c.app.state.services.queue
        assert cache.running
        second = submit(c, "second")
        wait_for(lambda: second in [e["id"] for e in _local(c.get("/v1/queue").json())["waiting"]],
                 "the new job to show")
    assert not cache.running
