"""Issue 47.6: counts in words are singular for one (a length of time, a job's replicas)."""
from service.ui.render_format import span


def test_a_span_of_one_second_is_singular():
    assert [span(n) for n in (1, 2, 59, 60, 3600, 86400, 5400)] == [
        "1 second", "2 seconds", "59 seconds", "1 minute", "1 hour", "1 day", "90 minutes"]
