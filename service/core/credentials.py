"""How a bearer credential is read from an Authorization header: the one parser, used by
authentication (service.auth.authenticate.bearer_hash) and by the stream cap that counts
streams per credential (service.web.overload.caller_of), so both see the same caller."""
from __future__ import annotations


def bearer_secret(authorization: str | None) -> str | None:
    """The token in `Authorization: Bearer <token>` (the scheme in any case, as RFC 6750 and
    fastapi.security.HTTPBearer read it; the rest of the value as it is), else None."""
    scheme, _, secret = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        return None
    return secret
