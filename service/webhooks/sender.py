"""One delivery attempt: check the destination again (DNS may have changed since the
subscription was made), send to an address that passed, never follow a redirect, read
a bounded piece of the answer, and do it all within one deadline."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from service.lifecycle.sanitize import clean_text
from service.webhooks import destinations
from service.webhooks.destinations import Network, Refused
from service.webhooks.lookups import Busy, Lookups

USER_AGENT = "trainjobs-webhooks/1"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None
    error: str | None
    response_body: str
    duration_ms: int


def client(concurrency: int) -> httpx.AsyncClient:
    # trust_env=False: no proxy from the environment, so the request goes to the address checked.
    return httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=None,
                             limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))


async def attempt(http: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str], *,
                  lookups: Lookups, team: object = None, allowed: tuple[Network, ...], timeout: float,
                  response_bytes: int) -> Outcome:
    t0 = time.monotonic()
    status: int | None = None
    kept = b""
    error: str | None = None
    try:
        async with asyncio.timeout(timeout):
            dest = destinations.parse(url)
            try:
                addresses = await destinations.resolve_async(dest, lookups, team)
            except Busy as e:
                raise Refused(f"{dest.host} was not looked up: {e}") from None
            except OSError as e:
                raise Refused(f"{dest.host} does not resolve ({e.strerror or e})") from None
            if not addresses:
                raise Refused(f"{dest.host} has no address")
            destinations.check_all(dest, addresses, allowed)
            target = httpx.URL(url)
            request = http.build_request(
                "POST", target.copy_with(host=str(addresses[0])), content=body,
                headers={**headers, "host": target.netloc.decode("ascii"), "content-type": "application/json",
                         "user-agent": USER_AGENT},
                # TLS is checked against the name, though the connection goes to the address.
                extensions={"sni_hostname": dest.host} if dest.scheme == "https" and dest.literal is None else {})
            response = await http.send(request, stream=True)
            try:
                status = response.status_code
                async for chunk in response.aiter_raw():
                    kept += chunk[:max(0, response_bytes - len(kept))]
                    if len(kept) >= response_bytes:
                        break
            finally:
                await response.aclose()
    except TimeoutError:
        error = f"no complete answer within {timeout:g} s (TRAINJOBS_WEBHOOK_REQUEST_TIMEOUT_SECONDS)"
    except Refused as e:
        error = e.message
    except httpx.HTTPError as e:
        error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    except OSError as e:
        error = f"{type(e).__name__}: {e}"
    duration = int((time.monotonic() - t0) * 1000)
    text = clean_text(kept.decode("utf-8", "replace"), response_bytes) if kept else ""
    ok = error is None and status is not None and 200 <= status < 300
    if error is None and not ok:
        error = f"the receiver answered {status}"
        if status is not None and 300 <= status < 400:
            error += " (a redirect: deliveries do not follow redirects; use the final URL)"
    return Outcome(ok, status, clean_text(error, 2000) if error else None, text, duration)
