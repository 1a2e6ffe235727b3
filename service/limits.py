"""Request body size limit, enforced before the body is parsed.

With Content-Length the answer is known at once. A chunked body declares no size,
so it is read here, up to the limit, before the app sees it: past the limit the
answer is 413 (had the app been reading it, FastAPI would turn any error raised
while reading into a 400). The buffer never holds more than the limit."""
from __future__ import annotations

import json

MEDIA_TYPE = b"application/problem+json"


class BodySizeLimitMiddleware:
    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = scope["headers"]
        declared = next((v for k, v in headers if k == b"content-length"), None)
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False  # the HTTP server refuses a malformed Content-Length itself
            if too_big:
                return await self._refuse(scope, send)
            return await self.app(scope, receive, send)
        if not any(k == b"transfer-encoding" for k, _ in headers):
            return await self.app(scope, receive, send)  # no body at all

        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away mid-body: nobody to answer
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                return await self._refuse(scope, send)
            chunks.append(body)
            if not message.get("more_body", False):
                break
        buffered = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay():
            nonlocal buffered
            if buffered is not None:
                message, buffered = buffered, None
                return message
            return await receive()  # later calls wait for the disconnect, as usual

        await self.app(scope, replay, send)

    async def _refuse(self, scope, send):
        body = json.dumps({"type": "https://trainjobs.dev/problems/body-too-large", "title": "Body too large",
                           "status": 413, "detail": f"request bodies are limited to {self.max_bytes} bytes; "
                           "send a smaller document", "instance": scope.get("path", "")}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", MEDIA_TYPE), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
