"""The job page colours log lines by severity, not by stream: what the classifier
says of each line of the shared table, and of each replica's lines apart."""
from __future__ import annotations

from dataclasses import dataclass

from service.ui.severity import Classifier, severities
from tests.ui.log_severity_cases import CASES


def test_each_line_of_the_table_gets_its_severity():
    classify = Classifier()
    assert [(m, classify(m)) for m, _ in CASES] == CASES


@dataclass
class Line:
    replica: str
    message: str


def test_a_traceback_is_followed_per_replica():
    lines = [Line("a", "Traceback (most recent call last):"), Line("b", "  an indented line of b"),
             Line("a", '  File "x.py", line 1, in f'), Line("b", "ordinary"), Line("a", "OSError: gone")]
    assert severities(lines) == ["traceback", "", "traceback", "", "error"]


@dataclass
class StreamLine:
    replica: str
    stream: str
    message: str


def test_a_traceback_is_followed_per_stream_whatever_the_other_stream_prints_between():
    """Lines come in time order across both streams: a stdout line between a traceback's lines
    (it happened on the page) must not end the traceback."""
    lines = [StreamLine("a", "stderr", "Traceback (most recent call last):"),
             StreamLine("a", "stdout", "a: step 3"),
             StreamLine("a", "stderr", "    main()"),
             StreamLine("a", "stderr", "ValueError: boom")]
    assert severities(lines) == ["traceback", "", "traceback", "error"]
