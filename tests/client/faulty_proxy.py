"""The suite's TCP proxy (tests/faults/tcp_proxy.py) in front of the real service, with a
Tap that breaks chosen HTTP exchanges: it drops the answer to a request (after the
service has handled it, so only the answer is lost), or cuts a followed log stream
partway through an event."""
from __future__ import annotations

import socket
import time

from tests.faults.tcp_proxy import Tap, TcpProxy

EVENT = b"event: log"


class FaultyProxy(TcpProxy):
    def __init__(self, target_port: int) -> None:
        self.drop_response_to: list[bytes] = []  # request-line prefixes, each used once
        self.cut_streams_after: list[int] = []   # followed logs: cut inside the Nth event, each used once
        self.dropped = 0
        self.cuts = 0
        self.follow_requests: list[bytes] = []   # the head of every followed-log request
        self.follow_times: list[float] = []      # when each came (time.monotonic())
        self.follow_statuses: list[int] = []     # the status each was answered
        super().__init__(connect=lambda: socket.create_connection(("127.0.0.1", target_port), timeout=10),
                         tap=lambda: _HttpFaults(self))
        self.url = f"http://127.0.0.1:{self.port}"


class _HttpFaults(Tap):
    """One connection's faults, chosen when its request goes by (the lists above, each
    entry used once)."""

    def __init__(self, proxy: FaultyProxy) -> None:
        self.proxy = proxy
        self.drop_next_response = False
        self.cut_after_events: int | None = None
        self.events_seen = 0
        self.follow = False  # this connection's request follows a log: its status is recorded

    def to_server(self, data: bytes) -> tuple[bytes, bool]:
        p = self.proxy
        with p._lock:
            for prefix in list(p.drop_response_to):
                if data.startswith(prefix):
                    p.drop_response_to.remove(prefix)
                    self.drop_next_response = True
                    break
            if b"follow=true" in data.split(b"\r\n", 1)[0]:
                p.follow_requests.append(data.split(b"\r\n\r\n", 1)[0])
                p.follow_times.append(time.monotonic())
                self.follow = True
                if p.cut_streams_after:
                    self.cut_after_events = p.cut_streams_after.pop(0)
                    self.events_seen = 0
        return data, True

    def to_client(self, data: bytes) -> tuple[bytes, bool]:
        p = self.proxy
        if self.follow and data.startswith(b"HTTP/1.1 "):
            self.follow = False
            with p._lock:
                p.follow_statuses.append(int(data[9:12]))
        if self.drop_next_response:
            # The service has answered, so it has done the work; the client never hears of it.
            with p._lock:
                p.dropped += 1
            return b"", False
        if self.cut_after_events is not None:
            cut = _nth(data, EVENT, self.cut_after_events - self.events_seen)
            if cut is not None:
                with p._lock:
                    p.cuts += 1
                return data[:cut + len(EVENT) + 3], False  # part of the event, not its end
            self.events_seen += data.count(EVENT)
        return data, True


def _nth(data: bytes, needle: bytes, n: int) -> int | None:
    at = -1
    for _ in range(n):
        at = data.find(needle, at + 1)
        if at < 0:
            return None
    return at if n > 0 else None
