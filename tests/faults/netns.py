"""A network namespace of the test's own, to drop a process's packets for real.

A process started in the namespace (`command()`) has a loopback of its own and no
other network. It reaches the database through a relay whose listening socket lives
in the namespace (127.0.0.1:<port> there) and whose upstream connections are made
from this process's namespace (to 127.0.0.1:5432). `drop()` adds an nftables rule in
the namespace that drops every packet to or from the relay's port: no FIN, no RST,
the TCP connections stay half-open, as in a partition. PostgreSQL keeps its side
(the relay's, which is healthy): what only a lease can see. Traffic goes to
127.0.0.0/8 only. Needs root, `ip` (iproute2) and `nft` (nftables)."""
from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import threading
import uuid

from tests.faults.tcp_proxy import TcpProxy

CLONE_NEWNET = 0x40000000


def available() -> str | None:
    """Why the namespace cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` (scripts/test.sh installs iproute2 and nftables)"
    return None


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=30)


class NetNs:
    def __init__(self) -> None:
        self.name = f"tjtest-{uuid.uuid4().hex[:8]}"
        _run("ip", "netns", "add", self.name)
        try:
            _run("ip", "-n", self.name, "link", "set", "lo", "up")
        except Exception:
            self.close()
            raise
        self.dropped = False
        self._relays: list[TcpProxy] = []

    def command(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def socket_inside(self, family=socket.AF_INET, kind=socket.SOCK_STREAM) -> socket.socket:
        """A socket created in the namespace (a socket's namespace is fixed at creation);
        setns() changes the calling thread only, so a thread of its own makes it."""
        made: list = []

        def make():
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                with open(f"/var/run/netns/{self.name}") as ns:
                    if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                made.append(socket.socket(family, kind))
            except BaseException as e:  # noqa: BLE001 - reported to the caller
                made.append(e)
        t = threading.Thread(target=make)
        t.start()
        t.join(10)
        if not made or isinstance(made[0], BaseException):
            raise RuntimeError(f"could not make a socket in {self.name}: {made}")
        return made[0]

    def relay(self, target_port: int) -> TcpProxy:
        """127.0.0.1:<port> inside the namespace, relayed to 127.0.0.1:target_port here."""
        listener = self.socket_inside()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        relay = TcpProxy("127.0.0.1", target_port, listener=listener)
        self._relays.append(relay)
        return relay

    def expose(self, inner_port: int) -> TcpProxy:
        """127.0.0.1:<port> here, relayed to 127.0.0.1:inner_port inside the namespace
        (to talk to a server running there)."""
        listener = socket.create_server(("127.0.0.1", 0))

        def connect():
            s = self.socket_inside()
            s.settimeout(5)
            s.connect(("127.0.0.1", inner_port))
            return s
        relay = TcpProxy(listener=listener, connect=connect)
        self._relays.append(relay)
        return relay

    def drop(self, port: int) -> None:
        """Drop every packet to or from `port` in the namespace, silently."""
        rules = (f"add table inet tjdrop\n"
                 f"add chain inet tjdrop input {{ type filter hook input priority 0; }}\n"
                 f"add rule inet tjdrop input tcp dport {port} drop\n"
                 f"add rule inet tjdrop input tcp sport {port} drop\n")
        subprocess.run(["ip", "netns", "exec", self.name, "nft", "-f", "-"], input=rules.encode(), check=True,
                       capture_output=True, timeout=30)
        self.dropped = True

    def undrop(self) -> None:
        _run("ip", "netns", "exec", self.name, "nft", "delete", "table", "inet", "tjdrop")
        self.dropped = False

    def close(self) -> None:
        for relay in self._relays:
            relay.close()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
