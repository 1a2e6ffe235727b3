"""A TCP proxy in front of the real service that breaks chosen HTTP exchanges:
it drops the answer to a request (after the service has handled it, so only the
answer is lost), or cuts a followed log stream partway through an event."""
from __future__ import annotations

import socket
import threading

EVENT = b"event: log"


class _Conn:
    def __init__(self) -> None:
        self.drop_next_response = False
        self.cut_after_events: int | None = None
        self.events_seen = 0


class FaultyProxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.drop_response_to: list[bytes] = []  # request-line prefixes, each used once
        self.cut_streams_after: list[int] = []   # followed logs: cut inside the Nth event, each used once
        self.dropped = 0
        self.cuts = 0
        self.follow_requests: list[bytes] = []   # the head of every followed-log request
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=10)
            upstream.settimeout(None)
            conn = _Conn()
            threading.Thread(target=self._requests, args=(client, upstream, conn), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, conn), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket, conn: _Conn) -> None:
        try:
            while data := src.recv(65536):
                with self.lock:
                    for prefix in list(self.drop_response_to):
                        if data.startswith(prefix):
                            self.drop_response_to.remove(prefix)
                            conn.drop_next_response = True
                            break
                    if b"follow=true" in data.split(b"\r\n", 1)[0]:
                        self.follow_requests.append(data.split(b"\r\n\r\n", 1)[0])
                        if self.cut_streams_after:
                            conn.cut_after_events = self.cut_streams_after.pop(0)
                            conn.events_seen = 0
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def _responses(self, src: socket.socket, dst: socket.socket, conn: _Conn) -> None:
        try:
            while data := src.recv(65536):
                if conn.drop_next_response:
                    # The service has answered, so it has done the work; the client never hears of it.
                    with self.lock:
                        self.dropped += 1
                    return
                if conn.cut_after_events is not None:
                    cut = _nth(data, EVENT, conn.cut_after_events - conn.events_seen)
                    if cut is not None:
                        dst.sendall(data[:cut + len(EVENT) + 3])  # part of the event, not its end
                        with self.lock:
                            self.cuts += 1
                        return
                    conn.events_seen += data.count(EVENT)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)


def _nth(data: bytes, needle: bytes, n: int) -> int | None:
    at = -1
    for _ in range(n):
        at = data.find(needle, at + 1)
        if at < 0:
            return None
    return at if n > 0 else None


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
