"""The bounded wait for the other replicas, with real sockets on 127.0.0.1."""

import socket

import pytest

from tests.trainer.helpers import free_port
from trainer.errors import ClusterError
from trainer.rendezvous import listening, reachable, wait_for_peers


def test_returns_once_every_peer_accepts_connections():
    with socket.create_server(("127.0.0.1", 0)) as peer:
        address = f"127.0.0.1:{peer.getsockname()[1]}"
        lines = []
        wait_for_peers("chief:0", f"127.0.0.1:{free_port()}", {"worker:0": address}, timeout=30, log=lines.append)
    assert lines == []


def test_a_peer_that_never_starts_is_named_in_the_log_and_the_error():
    missing = f"127.0.0.1:{free_port()}"
    lines = []
    ticks = iter(range(0, 1000))  # a fake clock: one second per reading, no real waiting on it

    with pytest.raises(ClusterError) as err:
        wait_for_peers("chief:0", None, {"worker:0": missing}, timeout=9, log=lines.append,
                       clock=lambda: float(next(ticks)), sleep=lambda seconds: None)
    assert "within 9 s (--cluster-timeout)" in str(err.value)
    assert f"worker:0 at {missing} (connection refused)" in str(err.value)
    # Logged every timeout/3 = 3 s, each line naming the task and why.
    assert len(lines) >= 2
    assert all("chief:0 waiting for 1 of 1 task(s) to start" in ln and "worker:0" in ln for ln in lines)


def test_the_replica_is_reachable_while_it_waits_and_frees_its_port_after():
    own = f"127.0.0.1:{free_port()}"
    assert reachable(own) == "connection refused"
    with listening(own):
        assert reachable(own) is None
    assert reachable(own) == "connection refused"
    # TensorFlow binds the same port next: it must be free again.
    with socket.create_server(("", int(own.rsplit(":", 1)[1]))):
        pass


def test_a_port_held_by_another_process_is_a_clear_error():
    with socket.create_server(("", 0)) as other:
        address = f"127.0.0.1:{other.getsockname()[1]}"
        with pytest.raises(ClusterError, match="cannot listen on port .* another process holds it"):
            with listening(address):
                pass


def test_an_unresolvable_host_is_reported_as_such():
    assert reachable("no-such-host.invalid:2222") == "host name does not resolve yet"
