"""The suite's one TCP proxy: accepts on a port and pipes each connection to a fresh one
upstream. Tests put it in front of PostgreSQL (cut the database without touching the
shared server), of the service (tests/client/faulty_proxy.py breaks chosen HTTP
exchanges through a Tap) and across network namespaces (tests/faults/netns.py)."""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable


def end(s: socket.socket) -> None:
    """shutdown() then close(): close() alone does not end a socket that another thread is
    blocked reading (the kernel keeps it open for that read: no FIN). That left
    PostgreSQL holding a cut session, and the controller's lock with it, whenever a
    pipe thread closed the socket before cut() shut it down (issue 23)."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


class Tap:
    """What one connection lets through. Each method gets a chunk as read from one side and
    returns (what to send on, whether the connection stays open); one Tap serves both
    directions of its connection, so it may carry what it saw in one to the other."""

    def to_server(self, data: bytes) -> tuple[bytes, bool]:
        return data, True

    def to_client(self, data: bytes) -> tuple[bytes, bool]:
        return data, True


class TcpProxy:
    """TcpProxy(host, port) listens on a free loopback port (`.port`) and connects each
    client to host:port; or give `listener` (a bound, listening socket) and `connect`
    (returns a connected socket) to accept and connect elsewhere. `tap()` makes each
    connection's Tap."""

    def __init__(self, target_host: str | None = None, target_port: int | None = None, *,
                 listener: socket.socket | None = None, connect: Callable[[], socket.socket] | None = None,
                 tap: Callable[[], Tap] = Tap) -> None:
        if connect is None:
            assert target_host and target_port, "a target, or a connect()"
            target = (target_host, target_port)
            connect = lambda: socket.create_connection(target, timeout=5)  # noqa: E731
        self._connect = connect
        self._tap = tap
        self.listener = listener or socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._kept: set[socket.socket] = set()   # server sides left open by cut(server_side=False)
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, server_side: bool = True) -> None:
        """Drop every open connection now and refuse new ones until restore().
        server_side=False: end only the client's side; the server keeps its session open
        (what a half-open path does) until close()."""
        with self._lock:
            self._cut.set()
            pairs, self._pairs = self._pairs, []
            if not server_side:
                self._kept.update(b for _, b in pairs)
        for a, b in pairs:
            end(a)
            if server_side:
                end(b)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        with self._lock:
            kept, self._kept = self._kept, set()
        for s in kept:
            end(s)
        end(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                end(client)
                continue
            try:
                upstream = self._connect()
                upstream.settimeout(None)
            except OSError:
                end(client)
                continue
            with self._lock:
                # A cut while this one was connecting: it must not survive it.
                if self._cut.is_set():
                    end(client)
                    end(upstream)
                    continue
                self._pairs.append((client, upstream))
            tap = self._tap()
            threading.Thread(target=self._pipe, args=(client, upstream, tap.to_server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, tap.to_client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, tap: Callable[[bytes], tuple[bytes, bool]]) -> None:
        try:
            while data := src.recv(65536):
                data, open_ = tap(data)
                if data:
                    dst.sendall(data)
                if not open_:
                    break
        except OSError:
            pass
        finally:
            with self._lock:
                ends = [s for s in (src, dst) if s not in self._kept]
            for s in ends:
                end(s)
