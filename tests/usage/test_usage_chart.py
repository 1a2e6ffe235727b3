"""The Queue page's usage section: every team's decayed use as bars, the caller's own team's use
per day; another team's use over time is not drawn for a member."""
from __future__ import annotations

import html
import re
from datetime import timedelta

from fastapi.testclient import TestClient

from service.core.clock import utcnow
from service.usage.billing import floor_hour
from tests.capacity.test_planner import _alpha
from tests.ui.conftest import sign_in
from tests.usage.usagekit import fold_at, hours_ago, ran


def test_the_queue_page_draws_each_teams_decayed_use_and_your_days(client, demo, tokens, session_factory):
    now = floor_hour(utcnow()) + timedelta(minutes=30)
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 50), end=hours_ago(now, 48), demand={"core": 1})
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 30), end=hours_ago(now, 20),
        demand={"core": 4}, team="beta")
    fold_at(session_factory, now)
    page = TestClient(client.app)
    sign_in(page, tokens["viewer"])
    r = page.get("/ui/queue")
    assert r.status_code == 200, r.text
    section = r.text[r.text.index('id="usage"'):]
    assert re.search(r'data-team="beta"[^>]*width="(\d+\.\d)"', section) and 'data-team="alpha"' in section
    widths = {t: float(w) for t, w in re.findall(r'data-team="(\w+)" x="\d+" y="[\d.]+" width="([\d.]+)"', section)}
    assert widths["beta"] > widths["alpha"] > 0                  # beta used 40 units, alpha 2
    assert len(re.findall(r'<rect class="pt s1" data-day=', section)) == 14
    text = html.unescape(section)
    assert "Your team (alpha), per day" in text and "beta:" in text   # beta's bar has its title; no beta days
    assert text.count("units</title>") == 2 + 14


def test_with_no_use_the_section_says_so(client, tokens):
    page = TestClient(client.app)
    sign_in(page, tokens["viewer"])
    section = page.get("/ui/queue").text
    assert "No use recorded yet." in section and "not computed yet" in section
