"""Creating a webhook waits for its receiver's name at most TRAINJOBS_WEBHOOK_RESOLVE_TIMEOUT_SECONDS,
however slow the name server: a member who points a webhook at a name their own server never
answers holds a request for that long, not for the system resolver's whole patience. For real: a
network namespace of the test's own whose only name server (127.0.0.1:53 there) reads every query
and answers none, and the lookups made in a process running inside it."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from service.slices import Settings, webhook_limits
from tests.faults import netns

ROOT = Path(__file__).resolve().parents[2]

# Run inside the namespace: the system resolver's own wait, the bounded check's, and a check
# made while every lookup thread still waits on the silent server.
PROBE = r"""
import json, socket, sys, time
from service.slices import Settings
from service.slices import webhook_limits
from service.webhooks import destinations
limits = webhook_limits(Settings(webhook_resolve_timeout_seconds=float(sys.argv[1])))
out = {}
t = time.monotonic()
out["checked"] = destinations.check_at_creation("https://hook.slow.test/h", limits.allowed_networks,
                                                limits.resolve_timeout).host
out["bounded"] = time.monotonic() - t
for i in range(3):   # with the first one, every lookup thread waits now
    destinations.check_at_creation(f"https://hook{i}.slow.test/h", (), 0.05)
t = time.monotonic()
out["busy"] = destinations.check_at_creation("https://other.slow.test/h", (), 5.0).host
out["busy_seconds"] = time.monotonic() - t
t = time.monotonic()
try:
    socket.getaddrinfo("raw.slow.test", 443, type=socket.SOCK_STREAM)
    out["raw"] = "resolved"
except OSError as e:
    out["raw"] = str(e)
out["raw_seconds"] = time.monotonic() - t
print(json.dumps(out))
"""


# Run inside the namespace: four dispatcher passes, each with deliveries to two silent names
# that give up after 0.3 s; then the lookup threads left behind.
DELIVERIES = r"""
import json, threading, uuid
from datetime import datetime, timezone
from service.webhooks import signing
from service.webhooks.dispatcher import Dispatcher, Due
from service.webhooks.limits import WebhookLimits
d = Dispatcher(None, None, WebhookLimits(concurrency=10, request_timeout=0.3), fence=None)
secret, team = signing.new_secret(), uuid.uuid4()
errors = []
for _ in range(4):
    due = [Due(uuid.uuid4(), signing.new_message_id(), 0, datetime.now(timezone.utc), {"n": i},
               f"https://{'a' if i % 5 else 'b'}.slow.test/h", secret, "json", team) for i in range(10)]
    errors += [o.error for o in d._send(due)]
threads = [t.name for t in threading.enumerate() if t.name.startswith(("webhook-lookup", "webhook-dns"))]
print(json.dumps({"errors": sorted(set(errors)), "threads": threads}))
"""


@pytest.fixture
def silent_dns():
    why = netns.available()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the slow name server test {why}")
        pytest.skip(why)
    ns = netns.NetNs()
    conf = Path("/etc/netns") / ns.name
    try:
        conf.mkdir(parents=True)
        # `ip netns exec` mounts these over /etc/resolv.conf and /etc/hosts for the process.
        (conf / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:3 attempts:1\n")
        (conf / "hosts").write_text("127.0.0.1 localhost\n")
        server = ns.socket_inside(socket.AF_INET, socket.SOCK_DGRAM)
        server.bind(("127.0.0.1", 53))   # reads nothing, answers nothing: the queries wait in its buffer
        yield ns
        server.close()
    finally:
        for f in conf.glob("*"):
            f.unlink()
        if conf.exists():
            conf.rmdir()
        ns.close()


def test_a_silent_name_server_holds_a_webhook_create_no_longer_than_the_setting(silent_dns):
    run = subprocess.run(silent_dns.command([sys.executable, "-c", PROBE, "0.5"]), capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # The name server really is silent: the system resolver waited its 3 s and gave up.
    assert out["raw_seconds"] >= 2.5 and out["raw"] != "resolved", out
    # The create's check: accepted (checked again at every delivery) after the 0.5 s set.
    assert out["checked"] == "hook.slow.test" and 0.4 <= out["bounded"] < 2.0, out
    # Every lookup thread busy with the silent server: accepted at once, no thread more.
    assert out["busy"] == "other.slow.test" and out["busy_seconds"] < 1.0, out


def test_the_setting_reaches_the_create():
    assert webhook_limits(Settings(webhook_resolve_timeout_seconds=0.7)).resolve_timeout == 0.7
    assert Settings().webhook_resolve_timeout_seconds == 2.0
    with pytest.raises(ValueError):
        Settings(webhook_resolve_timeout_seconds=0)


def test_deliveries_to_a_silent_name_leave_one_lookup_thread_per_name_whatever_the_passes(silent_dns):
    """Each dispatcher pass used to get lookup threads of its own: four passes of ten deliveries
    left up to sixteen threads waiting on the silent server. Now one per name, across passes."""
    run = subprocess.run(silent_dns.command([sys.executable, "-c", DELIVERIES]), capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # Each gave up at its deadline; on a slow host a pass may come after the resolver's own 3 s,
    # and its deliveries then share that lookup's failure: either way, no answer.
    assert "no complete answer within 0.3 s (TRAINJOBS_WEBHOOK_REQUEST_TIMEOUT_SECONDS)" in out["errors"], out
    assert set(out["errors"]) <= {"no complete answer within 0.3 s (TRAINJOBS_WEBHOOK_REQUEST_TIMEOUT_SECONDS)",
                                  "a.slow.test does not resolve (Temporary failure in name resolution)",
                                  "b.slow.test does not resolve (Temporary failure in name resolution)"}, out
    # One lookup per name at a time, and a thread only when none is idle: two threads.
    assert sorted(out["threads"]) == ["webhook-lookup-1", "webhook-lookup-2"], out


def test_a_webhooks_lookup_holds_no_request_seat():
    """The name server's time is not the process's: a creation's lookup gives the request's seat
    back while it waits (core/off_seat.py) and takes it again after; a literal address waits for
    nothing and gives nothing back."""
    from service.core.off_seat import HOOK
    from service.webhooks import destinations

    calls: list[str] = []
    hook = HOOK.set((lambda: calls.append("off"), lambda: calls.append("on")))
    try:
        assert destinations.resolve_within(destinations.parse("https://localhost/h"), 5.0)
        assert calls == ["off", "on"]
        destinations.resolve_within(destinations.parse("https://203.0.113.7/h"), 5.0)
        assert calls == ["off", "on"]
    finally:
        HOOK.reset(hook)
