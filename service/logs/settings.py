"""What the log endpoints need of the settings: the shared readers' bounds
(fanout.FanoutSettings) and a JSON page's size in bytes; built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from service.core.section import Section
from service.logs.batches import FanoutSettings


@dataclass(frozen=True)
class LogSettings:
    page_max_bytes: int        # TRAINJOBS_LOGS_PAGE_MAX_BYTES
    fanout: FanoutSettings     # TRAINJOBS_LOGS_*


class LogsEnv(Section):
    """The log endpoints: shared readers, followers, streams and JSON pages (docs/http.md)."""

    logs_follow_interval_seconds: float = Field(0.1, gt=0, description="How often a followed log is read")
    logs_follow_max_interval_seconds: float = Field(
        0.5, gt=0, le=60, description="A followed log with nothing new is read less and less often, up to this "
                                      "(or 4 times the backend's own floor: 20 s for Cloud Logging)")
    logs_reader_buffer_lines: int = Field(20_000, ge=100, le=1_000_000,
                                          description="Recent lines a shared log reader keeps for followers who join")
    logs_follower_buffer_lines: int = Field(
        10_000, ge=10, le=1_000_000, description="Unsent lines a follower may lag by before it is cut with a "
                                                 "`resync` event (it resumes with Last-Event-ID)")
    logs_reader_buffer_bytes: int = Field(
        4 << 20, ge=64 << 10, le=1 << 32, description="Bytes of recent events a shared log reader keeps (as sent: "
                                                      "JSON-escaped) for followers who join")
    logs_follower_buffer_bytes: int = Field(
        1 << 20, ge=64 << 10, le=1 << 32, description="Unsent bytes a follower may lag by before it is cut with "
                                                      "a `resync` event (it resumes with Last-Event-ID)")
    logs_buffer_bytes: int = Field(
        64 << 20, ge=1 << 20, le=1 << 36, description="Bytes all log readers and followers of one process hold "
                                                      "together; past it the laggiest followers are cut (resync) "
                                                      "and readers keep fewer recent lines")
    logs_stream_line_max_bytes: int = Field(
        16_384, ge=256, le=1 << 20, description="A streamed log line longer than this (as sent, JSON-escaped) "
                                                "is cut, with a visible marker; the JSON pages keep it whole")
    logs_stream_batch_bytes: int = Field(
        256 << 10, ge=16 << 10, le=64 << 20, description="Events one read of a followed log hands out at once "
                                                         "(bytes as sent); a read that finds more continues at once")
    logs_page_max_bytes: int = Field(
        4 << 20, ge=64 << 10, le=1 << 30, description="Message bytes in one JSON page of logs; a page stops "
                                                      "there (its cursor resumes after its last line)")
    logs_stream_max_seconds: float = Field(
        300.0, gt=0, le=86_400, description="A log stream of the API ends after this long with a `reconnect` "
                                            "event; clients resume with Last-Event-ID (the Python client and "
                                            "`jobs logs -f` do it themselves)")
    logs_heartbeat_seconds: float = Field(15.0, gt=0, description="SSE comment after this long without an event")
    logs_fanout_loop_share: float = Field(
        0.1, gt=0, le=1, description="The most of the event loop's time a shared log reader spends handing "
                                      "lines to its followers: with many followers it reads less often (bigger "
                                      "batches, the same lines) so requests are still answered at once")
