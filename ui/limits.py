"""A limit on request bodies, applied before anything parses them: a 10 MB "sentence" costs the server a JSON
parse and a copy per request before any of the app's own checks can refuse it."""

from __future__ import annotations

import json

MAX_BODY_BYTES = 1_000_000  # a request of the page is a few kilobytes; uploads have their own limit
EXEMPT_PATHS = ("/gradio_api/upload",)  # refused by Gradio's max_file_size as they arrive


class BodySizeLimit:
    """ASGI middleware: a request whose body is larger than ``max_bytes`` gets 413 with a message, unread.

    A declared Content-Length over the limit is refused at once; a body sent without one is counted as it
    arrives and cut off (the app sees the client go away) once it passes the limit.
    """

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES, exempt: tuple[str, ...] = EXEMPT_PATHS):
        self.app, self.max_bytes, self.exempt = app, max_bytes, exempt

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"].startswith(self.exempt):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self.refuse(send)
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            return {"type": "http.disconnect"} if received > self.max_bytes else message

        return await self.app(scope, counted, send)

    async def refuse(self, send) -> None:
        body = json.dumps({"detail": f"The request is larger than {self.max_bytes:,} bytes, the most this server "
                                     "reads; a sentence has at most a thousand characters."}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
