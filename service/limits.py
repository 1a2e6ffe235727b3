"""Request body size limit, enforced before the body is parsed."""
from __future__ import annotations

import json

MEDIA_TYPE = b"application/problem+json"


class BodyTooLarge(Exception):
    pass


class BodySizeLimitMiddleware:
    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False
            if too_big:
                return await self._refuse(scope, send)

        seen = 0
        started = False

        async def counting_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, send)

    async def _refuse(self, scope, send):
        body = json.dumps({"type": "https://trainjobs.dev/problems/body-too-large", "title": "Body too large",
                           "status": 413, "detail": f"request bodies are limited to {self.max_bytes} bytes; "
                           "send a smaller document", "instance": scope.get("path", "")}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", MEDIA_TYPE), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
