"""A TCP proxy the test controls, to cut the database connection without ever
touching the shared PostgreSQL server."""
from __future__ import annotations

import socket
import threading


def _end(s: socket.socket) -> None:
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


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
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
            _end(a)
            if server_side:
                _end(b)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        with self._lock:
            kept, self._kept = self._kept, set()
        for s in kept:
            _end(s)
        _end(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                _end(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _end(client)
                continue
            with self._lock:
                # A cut while this one was connecting: it must not survive it.
                if self._cut.is_set():
                    _end(client)
                    _end(upstream)
                    continue
                self._pairs.append((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                ends = [s for s in (src, dst) if s not in self._kept]
            for s in ends:
                _end(s)
