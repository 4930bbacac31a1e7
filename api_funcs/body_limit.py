"""A bound on request bodies (docs/money.md#request-bodies): every operation takes a few hundred
bytes, and without one a caller could make the host read, decode and validate megabytes."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api_funcs.http_middleware import HttpMiddleware
from api_funcs.problems import refusal_problem
from shared.errors import ValidationFailed

# Generous beside the largest legal body (a 1024-character password and a PIN, ~1.1 KB).
MAX_BODY_BYTES = 65_536


class BodyLimit(HttpMiddleware):
    """Refuse a body over `max_bytes` before any route reads it, whether the size is declared
    (Content-Length) or only counted as it arrives (chunked)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        # Read the body up front (it is small by the bound), then hand it on unchanged.
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = refusal_problem(ValidationFailed("body", f"at most {self.max_bytes} bytes"))
        await response(scope, receive, send)
