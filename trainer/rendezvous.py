"""Bounded wait for the other replicas before TensorFlow forms the cluster.

Creating a MultiWorkerMirroredStrategy blocks inside TensorFlow's C++ runtime,
holding the GIL, until every task in TF_CONFIG has come up: by default for up to
an hour, with no log line (and no Python thread can run meanwhile to report or
give up). So each replica first does its own rendezvous, in plain Python, with
a deadline:

  * it listens on its own TF_CONFIG port, so the peers can see it is alive;
  * it connects to each peer's address until every one of them accepts, logging
    the tasks not yet seen every `log_every` seconds (stderr);
  * at the deadline it gives up with an error naming the missing tasks.

Then it closes its listener and lets TensorFlow bind the same port. A peer that
already handed its port over is still "seen": any accepted connection on a
task's address means that task's process is up (its TensorFlow server answers
there from then on). No bytes are exchanged, so the listener never confuses a
TensorFlow server and vice versa.

Only pure Python here (no TensorFlow): the wait starts before the import cost
matters, and the tests can drive it in-process.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from trainer.errors import ClusterError

# How often an unseen peer is tried again, and how long one connect may take.
_RETRY_SECONDS = 0.5
_CONNECT_SECONDS = 2.0


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"cluster address {address!r} is not host:port")
    return host.strip("[]"), int(port)


@contextmanager
def listening(address: str | None) -> Iterator[None]:
    """Accept connections on this replica's port (all interfaces, like
    TensorFlow's server) for as long as the block runs. The kernel completes
    the peers' connects from the backlog; nothing needs to accept them."""
    if address is None:
        yield
        return
    _, port = split_address(address)
    try:
        if socket.has_dualstack_ipv6():
            server = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024)
        else:
            server = socket.create_server(("", port), backlog=1024)
    except OSError as exc:
        raise ClusterError(f"cannot listen on port {port} of this replica's cluster address {address}: "
                           f"{exc.strerror or exc}; another process holds it") from None
    try:
        yield
    finally:
        server.close()


def reachable(address: str) -> str | None:
    """None if something accepts connections at `address`, else why not."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_SECONDS):
            return None
    except socket.gaierror:
        return "host name does not resolve yet"
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _describe(pending: Mapping[str, str], why: Mapping[str, str]) -> str:
    return ", ".join(f"{name} at {address} ({why.get(name, 'not tried yet')})" for name, address in pending.items())


def wait_for_peers(
    me: str,
    own_address: str | None,
    peers: Mapping[str, str],
    timeout: float,
    log: Callable[[str], None],
    log_every: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Block until every peer accepts a connection; returns the seconds waited.

    Raises ClusterError naming the missing tasks once `timeout` seconds pass.
    """
    log_every = min(30.0, timeout / 3) if log_every is None else log_every
    start = clock()
    deadline = start + timeout
    next_log = start + log_every
    pending = dict(peers)
    why: dict[str, str] = {}
    with listening(own_address):
        while pending:
            for name, address in list(pending.items()):
                problem = reachable(address)
                if problem is None:
                    del pending[name]
                    why.pop(name, None)
                else:
                    why[name] = problem
            if not pending:
                break
            now = clock()
            if now >= deadline:
                raise ClusterError(
                    f"the cluster did not form within {timeout:g} s (--cluster-timeout): {me} never saw "
                    f"{len(pending)} of {len(peers)} task(s): {_describe(pending, why)}. Check those replicas' "
                    "logs: they may have failed to start, be unschedulable, or still be pulling their image "
                    "(then raise --cluster-timeout)"
                )
            if now >= next_log:
                log(f"{me} waiting for {len(pending)} of {len(peers)} task(s) to start "
                    f"({now - start:.0f} s of {timeout:g} s): {_describe(pending, why)}")
                next_log += log_every
            sleep(min(_RETRY_SECONDS, max(deadline - now, 0)))
    return clock() - start
