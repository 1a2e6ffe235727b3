"""Issue 39, point 4: quiet when nothing is wrong. A 429 or 503 from Google is expected (the
service handles it by design): one WARNING line naming the operation, Google's answer and
when it is tried again, never a traceback. Before, every refused listing logged "backend
vertex: poll failed; will retry next pass" with a traceback (18-24 of them in a chaos run)."""
from __future__ import annotations

import logging

from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


def _lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("trainjobs") and r.levelno >= logging.WARNING]


def test_429_and_503_are_one_warning_line_each_without_a_traceback(make_harness, fake_vertex, monkeypatch, caplog):
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        clock.freeze()
        running = h.submit()["id"]
        fake_vertex.set_state(running, "JOB_STATE_RUNNING")
        h.reconcile()
        caplog.set_level(logging.INFO, logger="trainjobs")
        caplog.clear()
        expected = []

        fake_vertex.fail("list", 503)
        clock.advance(1)                                    # a listing is due at every pass that moves on
        h.reconcile()
        expected.append("backend vertex: poll deferred: listing CustomJobs (page 1): Google answered 503 "
                         "UNAVAILABLE: The service is currently unavailable.; trying again at the next controller "
                         "pass")
        h.reconcile()                                       # it answers again: no line

        fake_vertex.fail_rate_limit("list")
        clock.advance(1)
        h.reconcile()
        expected.append("backend vertex: poll deferred: listing CustomJobs (page 1): Google answered 429 "
                        "RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'aiplatform.googleapis.com/"
                        "job_service_requests' and limit 'per minute per region' of service "
                        "'aiplatform.googleapis.com' for consumer 'projects/test-project'.; trying again in 2 s "
                        "(crud calls pause after a 429)")
        clock.advance(1)
        h.reconcile()                                       # paused: no call, no line
        clock.advance(2)

        fake_vertex.fail("create", 429)
        new = h.submit()["id"]
        expected.append(f"job {new}: submit deferred: creating the CustomJob: Google answered 429 "
                        "RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota).; trying again in 2 s "
                        "(create calls pause after a 429)")
        clock.advance(2)
        h.reconcile()
        assert h.job(new)["backend_ref"]

        h.client.post(f"/v1/jobs/{running}/cancel")
        fake_vertex.fail("cancel", 503)
        h.reconcile()
        name = fake_vertex.find(running)[0]["name"]
        expected.append(f"job {running}: cancel deferred: cancelling {name}: Google answered 503 UNAVAILABLE: The "
                        "service is currently unavailable.; trying again at the next controller pass")
        h.reconcile()
        assert fake_vertex.find(running)[0]["state"] == "JOB_STATE_CANCELLING"

        lines = _lines(caplog)
        assert [r.exc_info for r in lines if r.exc_info] == []          # no traceback at all
        assert [r.getMessage() for r in lines] == expected
        assert all(r.levelno == logging.WARNING for r in lines)


def test_what_nobody_expected_still_logs_its_traceback(make_harness, fake_vertex, monkeypatch, caplog):
    """A bug of ours in a poll (here: the listing's answer cannot be parsed) is no expected refusal."""
    with make_harness() as h:
        job = h.submit()["id"]
        monkeypatch.setattr(type(h.backend.calls), "page", lambda *a, **k: (_ for _ in ()).throw(KeyError("boom")))
        caplog.set_level(logging.INFO, logger="trainjobs")
        caplog.clear()
        stats = h.reconcile()
        assert stats.errors == 1 and h.job(job)["state"] == "QUEUED"
        [line] = _lines(caplog)
        assert line.getMessage() == "backend vertex: poll failed; will retry next pass" and line.exc_info
