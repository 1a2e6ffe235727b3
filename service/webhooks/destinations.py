"""Where a webhook may be sent. A subscription's URL is a member of the public
internet unless the operator says otherwise: an address that is private, loopback,
link-local (cloud metadata at 169.254.169.254), shared, reserved, multicast or
otherwise not global is refused unless it lies in TRAINJOBS_WEBHOOK_ALLOWED_NETWORKS.
The check runs at creation and again at every attempt, on every address the name
resolves to then, and the request goes to an address that passed (sender.py):
a name whose DNS answer changes cannot steer a delivery inside."""
from __future__ import annotations

import ipaddress
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from service.core.off_seat import waiting_elsewhere

if TYPE_CHECKING:
    from service.webhooks.lookups import Lookups

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """This destination may not be used: `message` says why, `fix` what to do."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str          # lower-case name or IP literal (no brackets)
    port: int
    literal: IP | None  # the host, when it is an IP address


def parse_networks(cidrs: list[str]) -> tuple[Network, ...]:
    out = []
    for cidr in cidrs:
        try:
            out.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError:
            raise ValueError(f"TRAINJOBS_WEBHOOK_ALLOWED_NETWORKS: {cidr!r} is not a network; "
                             "use CIDR notation, e.g. 10.20.0.0/16 or 127.0.0.1/32") from None
    return tuple(out)


def parse(url: str) -> Destination:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise Refused(f"not a valid URL: {e}", "use https://host[:port]/path") from None
    if parts.scheme not in ("http", "https"):
        raise Refused(f"scheme {parts.scheme or '(none)'!r} is not supported", "use an https:// (or http://) URL")
    if parts.username is not None or parts.password is not None:
        raise Refused("credentials in the URL are not accepted",
                      "remove user:password@; receivers authenticate deliveries by their signature")
    if parts.fragment:
        raise Refused("the URL has a #fragment, which is never sent", "remove it")
    host = parts.hostname or ""
    if not host:
        raise Refused("the URL has no host", "use https://host[:port]/path")
    if not host.isascii():
        raise Refused("the host name is not ASCII", "write it in its xn-- (punycode) form")
    try:
        literal: IP | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
        if not all(c.isalnum() or c in "-._" for c in host):
            raise Refused(f"{host!r} is not a host name", "use a DNS name or an IP address") from None
    return Destination(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), literal)


def _nets(*cidrs: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# Not public whatever Python's table of the day says (3.11 calls fec0::/10 global, and its
# tables changed between releases): IANA's special-purpose registries, each range named.
_NOT_PUBLIC_V4 = _nets(
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24",       # IETF protocol assignments (DS-Lite, NAT64 discovery, PCP, TURN)
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",  # documentation
    "192.88.99.0/24",     # the deprecated 6to4 relay anycast
    "192.168.0.0/16", "198.18.0.0/15",  # private; benchmarking
    "224.0.0.0/4", "240.0.0.0/4")       # multicast; reserved (and 255.255.255.255)
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")  # outside it: ::/8, 100::/64 (discard), 5f00::/16
# (SRv6), fc00::/7 (unique local), fe80::/10 (link-local), fec0::/10 (deprecated site-local), ff00::/8
_NOT_PUBLIC_V6 = _nets(
    "2001::/23",          # IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID
                          # 2001:10::/28 and ORCHIDv2 2001:20::/28
    "2001:db8::/32", "3fff::/20",  # documentation
    "2002::/16")          # 6to4: reaches whatever IPv4 address it embeds, through a relay


def is_public(ip: IP) -> bool:
    if isinstance(ip, ipaddress.IPv4Address):
        return ip.is_global and not any(ip in net for net in _NOT_PUBLIC_V4)
    if ip.ipv4_mapped is not None:
        return is_public(ip.ipv4_mapped)
    if ip in NAT64:  # reaches the IPv4 address it embeds (64:ff9b:1::/48, local-use NAT64, is refused below)
        return is_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    # ::/8 holds ::, ::1, the deprecated IPv4-compatible ::a.b.c.d (::/96) and IPv4-translated
    # ::ffff:0:a.b.c.d (RFC 2765): Python calls the last two "global"; a stack that still
    # honours them reaches the IPv4 address inside, e.g. http://[::127.0.0.1]/. Only global
    # unicast (2000::/3) can be a public receiver.
    return (ip in _GLOBAL_UNICAST_V6 and ip.is_global and not any(ip in net for net in _NOT_PUBLIC_V6))


def check_address(ip: IP, allowed: tuple[Network, ...]) -> None:
    if is_public(ip) or any(ip.version == net.version and ip in net for net in allowed):
        return
    raise Refused(f"{ip} is not a public address (private, loopback, link-local or reserved); webhooks are "
                  "not sent there", "use a receiver reachable on the internet, or ask the operator to "
                  "list its network in TRAINJOBS_WEBHOOK_ALLOWED_NETWORKS")


def _addresses(infos) -> list[IP]:
    seen: list[IP] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        if ip not in seen:
            seen.append(ip)
    return seen


def check_all(dest: Destination, addresses: list[IP], allowed: tuple[Network, ...]) -> None:
    """Every address the name has must pass: which one a client would use is not ours to know."""
    for ip in addresses:
        try:
            check_address(ip, allowed)
        except Refused as e:
            if dest.literal is None:
                raise Refused(f"{dest.host} resolves to {e.message}", e.fix) from None
            raise


async def resolve_async(dest: Destination, lookups: Lookups, owner: object = None) -> list[IP]:
    """A delivery's lookup, on the process's lookup threads (service/webhooks/lookups.py),
    within its team's (`owner`'s) share of them."""
    if dest.literal is not None:
        return [dest.literal]
    return _addresses(await lookups.resolve(dest.host, dest.port, owner))


# The lookups made while a webhook is created run on threads of their own, at most this many at
# once: a member whose name server never answers ties up these (each until the system resolver
# gives up), not a request thread; daemon threads, so a stopping service does not wait for them.
_LOOKUPS = threading.BoundedSemaphore(4)


def resolve_within(dest: Destination, timeout: float) -> list[IP] | None:
    """The destination's addresses, or None when the name did not resolve within `timeout`
    seconds (a slow name server, or every lookup thread still waiting on one). Raises OSError
    when the name does not resolve."""
    if dest.literal is not None:
        return [dest.literal]
    if not _LOOKUPS.acquire(blocking=False):
        return None
    found: dict[str, object] = {}
    done = threading.Event()

    def lookup() -> None:
        try:
            found["infos"] = socket.getaddrinfo(dest.host, dest.port, type=socket.SOCK_STREAM)
        except OSError as e:
            found["error"] = e
        finally:
            _LOOKUPS.release()
            done.set()

    threading.Thread(target=lookup, name="webhook-lookup", daemon=True).start()
    with waiting_elsewhere():       # a name server's time: the request's seat is free meanwhile
        if not done.wait(timeout):
            return None
    if "error" in found:
        raise found["error"]  # type: ignore[misc]
    return _addresses(found["infos"])


def check_at_creation(url: str, allowed: tuple[Network, ...], resolve_timeout: float = 2.0) -> Destination:
    """Refuse a URL that is malformed or points at a refused address now. A name that does
    not resolve yet, or not within `resolve_timeout` (TRAINJOBS_WEBHOOK_RESOLVE_TIMEOUT_SECONDS),
    is accepted: every delivery checks again (and its log says why it failed)."""
    dest = parse(url)
    try:
        addresses = resolve_within(dest, resolve_timeout)
    except OSError:
        return dest
    if addresses is not None:
        check_all(dest, addresses, allowed)
    return dest
