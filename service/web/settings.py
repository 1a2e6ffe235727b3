"""The HTTP edge's TRAINJOBS_* variables: request slots, streams, bodies, headers, hostile clients
(service/web/body_limits.py, overload.py, protocol.py) and the GIL switch interval; read as part of
the one Settings (service/slices.py)."""
from __future__ import annotations

from pydantic import Field

from service.core.section import Section


class WebEnv(Section):
    """Requests, streams and the HTTP edge of one API process (docs/http.md): service/web/overload.py,
    body_limits.py, protocol.py."""

    max_concurrent_requests: int = Field(
        2, ge=1, le=1000, description="Requests one process runs at once (log streams aside); the threads and "
                                      "database connections are sized from it (service/web/overload.py). The others "
                                      "wait their turn, seated fairly between teams (service/web/seats.py). A "
                                      "process's requests share one GIL: 2 keep it busy while one waits for the "
                                      "database, and a team asking now and then waits for one request, not for "
                                      "every heavy reader's (docs/http.md, \"Whose request runs next\")")
    max_requests_waiting_elsewhere: int = Field(
        8, ge=0, le=1000, description="Requests of one process that may wait on another process or host (a cold "
        "queue read, an import's parse, Cloud Logging) without their request slot; past it such a wait keeps its "
        "slot. Their threads and database connections come on top of the slots' (docs/http.md, \"Whose request "
        "runs next\")")
    request_queue_seconds: float = Field(
        5.0, ge=0, le=30, description="How long a request waits its turn for a slot before it is answered 503 "
                                      "with Retry-After (a busy process serves its slots' requests in turn: a burst "
                                      "waits rather than fails)")
    max_streams: int = Field(10_000, ge=1, le=100_000, description="Log streams (SSE) one process serves at once "
                             "(10,000: 10,000 followers across two workers reach one unevenly, bench/load.py; "
                             "needs as many open files)")
    stream_queue_seconds: float = Field(
        30.0, ge=0, le=120, description="How long opening a log stream waits for a request slot (it needs one "
                                        "until the stream starts) before it is answered 503 with Retry-After "
                                        "(30 s: 5,000 followers connecting at once all open, bench/load.py)")
    db_pool_timeout_seconds: float = Field(
        5.0, gt=0, le=60, description="The longest wait for a database connection; then 503")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies are refused with 413 "
                                "(with Content-Length, or counted as a chunked body arrives)")
    max_problems: int = Field(50, ge=1, le=1000, description="A 4xx lists at most this many problems in `errors`; "
                              "`errors_omitted` says how many more there were")
    http_max_header_bytes: int = Field(32_768, ge=1024, le=1_048_576,
                                       description="Request line plus headers, in bytes; more answers 431")
    http_max_headers: int = Field(100, ge=8, le=10_000, description="Header fields per request; more answers 431")
    http_header_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="A request's line and headers must arrive within this long of its first "
                                        "byte (or of the connection opening); else 408 and the connection closes")
    http_body_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="A request body must arrive within this long of its head, plus 1 s per "
                                        "TRAINJOBS_HTTP_BODY_MIN_BYTES_PER_SECOND bytes received; else 408. "
                                        "Bodies are read before a request takes a request slot")
    http_body_min_bytes_per_second: float = Field(
        1024.0, gt=0, le=1 << 30, description="The slowest upload rate that earns more time for a body")
    http_body_max_seconds: float = Field(
        60.0, gt=0, le=3600, description="The longest any request body may take to arrive, however fast it "
                                         "comes; then 408")
    http_body_buffer_bytes: int = Field(
        64 << 20, ge=1 << 20, le=1 << 34, description="Bytes of request bodies one process holds at once "
                                                      "(being read or served, counted as bytes arrive); more answers 503 "
                                                      "with Retry-After")
    max_streams_per_caller: int = Field(
        64, ge=1, le=100_000, description="Streams (SSE) one credential (token or UI sign-in) may have open in "
                                          "one process; more answers 429")
    shutdown_grace_seconds: float = Field(
        3.0, ge=0, le=600, description="On SIGINT/SIGTERM, streams end at once (with a `reconnect` event); "
                                       "requests still running get this long before they are cancelled. "
                                       "A second signal exits at once")
    gil_switch_interval_ms: float = Field(
        0.5, ge=0.05, le=100, description="How long one thread of a process may hold Python's GIL while "
                                          "another waits for it (sys.setswitchinterval; Python's own is 5 ms), "
                                          "while at least GIL_FAST_SWITCH_STREAMS log streams are open: "
                                          "while the event loop writes a batch of log lines to thousands of "
                                          "followers, a request's thread waits up to this at every database "
                                          "round trip")
    gil_fast_switch_streams: int = Field(
        100, ge=0, le=100_000, description="From this many open log streams on, the GIL's switch interval is "
                                           "GIL_SWITCH_INTERVAL_MS; below, Python's own (a burst of submits "
                                           "costs 13% less CPU with it). 0: always")
