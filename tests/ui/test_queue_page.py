"""/ui/queue: the same queue as GET /v1/queue, server-rendered in the pages' layout, on SQLite
and PostgreSQL; another team's waiting jobs without id or name; a backend not enabled."""
from __future__ import annotations

import copy
import html
import re
import uuid
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, update

from service.core.clock import utcnow
from service.persistence.models import Job, TeamShare
from tests.backends.localkit import Api, settings_for
from tests.capacity.queuekit import set_capacity, set_share, shape, write
from tests.conftest import ONE_DATABASE, bearer
from tests.ui.conftest import new_client, template_body

pytestmark = ONE_DATABASE


@pytest.fixture
def ui_settings(db_url, work_dir):  # noqa: F811
    # Jobs stay QUEUED (no controller; launch slots to spare); the queue is computed on every read.
    return settings_for(db_url, work_dir, local_max_running_jobs=8, run_reconciler=False, queue_cache_seconds=0)


@pytest.fixture
def scene(app, client, api, tokens, db_url) -> dict:
    beta = Api(TestClient(app, headers=bearer(tokens["other"])))
    ids = {}
    for who in (api, beta):
        body = template_body("tiny")
        who.template("tiny", body["spec"], parameters=body["parameters"])
    ids["b1"] = beta.submit("tiny", display_name="bob-running")["id"]
    ids["b2"] = beta.submit("tiny", display_name="bob-secret")["id"]
    ids["a1"] = api.submit("tiny", display_name="<b>alice</b>-waits")["id"]
    set_capacity(db_url, "local", {"core": 2})
    set_share(db_url, "alpha", "local", {"core": 1})
    shape(db_url, ids["b1"], demand={"core": 2}, running=True)
    shape(db_url, ids["b2"], demand={"core": 1})
    shape(db_url, ids["a1"], demand={"core": 1}, priority=3)
    return ids


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_queue_page_shows_capacity_teams_and_waiting_jobs(app, scene, tokens):
    c = new_client(app, tokens["viewer"])
    r = c.get("/ui/queue")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page, text = r.text, _text(r.text)
    assert '<a href="/ui/queue" aria-current="page">Queue</a>' in page          # the nav, current page marked
    assert "Capacity 2 cores (set by an operator); in use 2 cores; free 0 cores." in text
    assert "1 running, 2 waiting (0 about to start)" in text
    assert "beta — 2 cores 2 cores 1 1 1" in text                               # borrows all it uses
    assert f'<a href="/ui/jobs/{scene["a1"]}">&lt;b&gt;alice&lt;/b&gt;-waits</a>' in page   # escaped, linked
    assert re.search(r"needs 1 cores?, 0 free", text) and "next in line" in text   # the scheduler's words
    assert "another team's job" in text
    for secret in (scene["b1"], scene["b2"], "bob-secret", "bob-running"):
        assert secret not in page


def test_the_other_team_sees_alphas_jobs_only_as_entries(app, scene, tokens):
    page = new_client(app, tokens["other"]).get("/ui/queue?backend=local").text
    assert f'/ui/jobs/{scene["b2"]}' in page and "bob-secret" in page
    assert scene["a1"] not in page and "alice" not in page


def test_a_backend_not_enabled_and_signed_out(app, scene, tokens):
    r = new_client(app, tokens["viewer"]).get("/ui/queue?backend=vertex")
    assert r.status_code == 404 and "not enabled" in html.unescape(r.text)
    r = new_client(app).get("/ui/queue", headers={"Accept": "text/html"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=%2Fui%2Fqueue"


def test_a_waiting_jobs_page_says_its_place(app, scene, tokens):
    c = new_client(app, tokens["viewer"])
    text = _text(c.get(f"/ui/jobs/{scene['a1']}").text)
    assert "In the queue position 1" in text and re.search(r"needs 1 cores?, 0 free", text)
    # Beta's running job, on beta's page: no place in the queue.
    assert "In the queue" not in _text(new_client(app, tokens["other"]).get(f"/ui/jobs/{scene['b1']}").text)


def test_a_job_newer_than_the_queue_shown_says_it_is_not_yet_placed(app, scene, tokens, api):
    """Submitted after the computation shown (kept here: a TTL of a minute, no refresh meanwhile):
    its page says it is not placed yet and why, not a blank or "position None"."""
    cache = app.state.services.queue
    c = new_client(app, tokens["viewer"])
    assert "In the queue position 1" in _text(c.get(f"/ui/jobs/{scene['a1']}").text)
    cache.cache.seconds = 60.0
    cache.next_start = cache.clock() + 3600
    newer = api.submit("tiny", display_name="newer")["id"]
    text = _text(c.get(f"/ui/jobs/{newer}").text)
    assert "In the queue not yet placed" in text and "not yet in the queue computed at" in text
    assert "position None" not in text


def test_a_preempted_jobs_page_lists_its_preemption_and_another_page_none(app, scene, tokens, db_url):
    """Issue 38, point 5, on the UI: when, for which job, why, the step it kept."""
    def preempted(session):
        session.execute(update(Job).where(Job.id == uuid.UUID(scene["a1"])).values(
            state="FAILED", preempt_requested_at=utcnow(), preempted_for=uuid.UUID(scene["b2"]),
            preempt_reason="reclaim: team beta takes back its nominal quota <b>now</b>",
            progress={"preempted_at": {"step": 42}}, error={"cause": "preemption", "message": "preempted"}))
    write(db_url, preempted)
    c = new_client(app, tokens["viewer"])
    for url in (f"/ui/jobs/{scene['a1']}", f"/ui/jobs/{scene['a1']}/panels"):
        page = c.get(url).text
        section = page[page.index('id="panel-preemptions"'):page.index('id="panel-events"')]
        text = _text(section)
        assert "hidden" not in section.split(">", 1)[0]
        # For team beta's job: alpha reads that it was another team's, never that job's id.
        assert "this one" in text and "another team's job" in text and "reclaim" in text
        assert scene["b2"] not in page and scene["b2"][:8] not in page
        assert "saved at step 42" in text
        assert "team beta takes back its nominal quota <b>now</b>" in text and "<b>now</b>" not in section  # escaped
    # A job never preempted: the panel is there (for the live swap) and hidden.
    page = new_client(app, tokens["other"]).get(f"/ui/jobs/{scene['b1']}").text
    assert '<section class="panel" id="panel-preemptions" data-live aria-labelledby="h-preemptions" hidden>' in page


def test_the_queue_and_a_waiting_jobs_page_show_the_likely_start_and_the_latest(app, api, scene, tokens, db_url):
    """Issue 49.2: both times, labelled. Without its quota alpha preempts nothing: it waits for
    beta's running job to end. Beta's last run of its template took 60 s, so that job likely
    ends a minute after it started, long before its time limit."""
    def limited(session):   # beta's running job: a one-hour time limit
        job = session.get(Job, uuid.UUID(scene["b1"]))
        compiled = copy.deepcopy(job.compiled)
        compiled["custom_job"]["jobSpec"].setdefault("scheduling", {})["timeout"] = "3600s"
        job.compiled = compiled
        session.execute(delete(TeamShare))
    write(db_url, limited)
    beta = Api(TestClient(app, headers=bearer(tokens["other"])))
    done = beta.submit("tiny", display_name="bob-done")["id"]
    now = utcnow()
    write(db_url, lambda s: s.execute(update(Job).where(Job.id == uuid.UUID(done)).values(
        state="SUCCEEDED", started_at=now - timedelta(minutes=10), ended_at=now - timedelta(minutes=9))))
    [q] = api.c.get("/v1/queue?backend=local").json()["items"]
    [mine] = [e for e in q["waiting"] if e["id"] == scene["a1"]]
    likely, latest = (datetime.fromisoformat(mine[k]) for k in ("likely_start", "estimated_start"))
    assert likely < latest
    c = new_client(app, tokens["viewer"])
    page = c.get("/ui/queue").text
    assert '<th scope="col">Likely start</th><th scope="col">At the latest</th>' in page
    table = page[page.index('<table class="waiting">'):]      # the table, not page 1's summary of your jobs
    row = table[table.index(f'/ui/jobs/{scene["a1"]}'):]
    row = row[:row.index("</tr>")]
    # Each computation plays from its own now, on the controller's pass ticks: the page's times are
    # the API's within a pass (TRAINJOBS_RECONCILE_INTERVAL_SECONDS).
    shown = {k: datetime.fromisoformat(row.split(f'<td class="{k}"><time datetime="', 1)[1].split('"', 1)[0])
             for k in ("likely", "latest")}
    assert abs((shown["likely"] - likely).total_seconds()) <= 1 and abs((shown["latest"] - latest).total_seconds()) <= 1
    assert '<td class="likely">—</td> <td class="latest">—</td>' in " ".join(page.split())   # beta's: no times
    place = c.get(f"/ui/jobs/{scene['a1']}").text
    place = place[place.index('id="queue-place"'):]
    place = place[:place.index("</dd>")]
    times = [datetime.fromisoformat(part.split('"', 1)[0]) for part in place.split('<time datetime="')[1:]]
    assert ", likely start <time" in place and ", at the latest <time" in place and len(times) == 2, place
    assert abs((times[0] - likely).total_seconds()) <= 1 and abs((times[1] - latest).total_seconds()) <= 1


def test_the_queue_and_a_waiting_jobs_page_show_its_priority_in_parts(app, scene, tokens):
    """Issue 52.4 on the UI: under each waiting job its priority in parts, the tier first; another
    team's job with only what the queue shows of it (its team's fair share, priority, size)."""
    page = new_client(app, tokens["viewer"]).get("/ui/queue").text
    table = page[page.index('<table class="waiting">'):]
    rows = [_text(r) for r in re.findall(r'<tr class="factors-row">(.*?)</tr>', table, re.S)]
    assert len(rows) == 2, rows
    mine, theirs = rows
    assert re.fullmatch(r"Priority in parts: tier nominal \(keeps its team inside its nominal quota\) · fair share #1 "
                        r"\(borrowed 0\.00, held 0\.00, weight 1\) · priority 3 · waited \d+s · size 0\.50", mine), mine
    assert theirs == "Priority in parts: fair share #2 (borrowed 1.00, held 1.00, weight 1) · priority 0 · size 0.50"
    # Beta reads its own job's: behind alpha's by its tier, and nothing of alpha's job but those parts.
    other = _text(new_client(app, tokens["other"]).get("/ui/queue").text)
    assert "tier fair (fair order between teams)" in other and "behind the job above by its tier" in other
    assert "tier nominal" not in other
    job = _text(new_client(app, tokens["viewer"]).get(f"/ui/jobs/{scene['a1']}").text)
    assert re.search(r"Priority in parts: tier nominal .* fair share #1 .* size 0\.50", job), job
