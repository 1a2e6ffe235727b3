"""The headers every HTML page of the service carries (the UI and the docs pages)."""
from __future__ import annotations

# Scripts and styles come from /ui/static only (no inline code): a hostile string that
# slipped into a page still could not run.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
