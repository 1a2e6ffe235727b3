"""The auth domain's TRAINJOBS_* variables; read as part of the one Settings (service/slices.py)."""
from __future__ import annotations

from pydantic import Field

from service.core.section import Section


class AuthEnv(Section):
    """The submit path's token cache (service/auth)."""

    auth_cache_seconds: float = Field(
        60.0, ge=0, le=3600, description="How long each API process remembers a token's team and role for "
                                         "submits (POST /v1/jobs); a revocation is still checked on every "
                                         "submit, in the same round trip as the template (0: no cache)")
    auth_cache_size: int = Field(
        10_000, ge=0, le=1_000_000, description="Tokens each API process remembers (least recently used out)")
