"""The app's own ASGI middleware: the bound on request bodies and the catch-all."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api_funcs.problems import refusal_problem, unhandled
from shared.errors import ValidationFailed

# Generous beside the largest legal body (a 1024-character password and a PIN, ~1.1 KB).
MAX_BODY_BYTES = 65_536


class WatchedSend:
    """A request's `send`, noting the status once the response has started."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status: int | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)


class HttpMiddleware:
    """An ASGI middleware whose `http` sees each HTTP request, its `send` noting the status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, WatchedSend(send))
        else:
            await self.app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: WatchedSend) -> None:
        raise NotImplementedError


class BodyLimit(HttpMiddleware):
    """Refuse a body over MAX_BODY_BYTES, declared or counted, before any route reads it."""

    async def http(self, scope: Scope, receive: Receive, send: WatchedSend) -> None:
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        refused = declared.isdigit() and int(declared) > MAX_BODY_BYTES
        # Otherwise read the body up front (it is small by the bound), then hand it on unchanged.
        messages: list[Message] = []
        size, more = 0, True
        while more and not refused:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            refused = size > MAX_BODY_BYTES
            more = message["type"] == "http.request" and message.get("more_body", False)
        if refused:
            error = ValidationFailed("body", f"at most {MAX_BODY_BYTES} bytes")
            await refusal_problem(error)(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


class UnhandledErrors(HttpMiddleware):
    """An exception no handler answered becomes a 500 INTERNAL_ERROR and one Error line. Not an
    `Exception` handler, which ServerErrorMiddleware re-raises after, for the server to print."""

    async def http(self, scope: Scope, receive: Receive, send: WatchedSend) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            # The traceId the route may already have used (request.state lives in the scope).
            response = await unhandled(Request(scope), exc)
            # Once the status is sent, the server closes the connection short of its body,
            # which the client sees as a failed response.
            if send.status is None:
                await response(scope, receive, send)
