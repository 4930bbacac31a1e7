"""What the app's own ASGI middleware share: HTTP requests only (lifespan passes through
untouched), and the status of a response once it has started."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HttpMiddleware:
    """An ASGI middleware whose `http` sees each HTTP request; any other scope goes on as is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class WatchedSend:
    """A request's `send`, noting the status once the response has started (after which no
    other answer can be sent)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status: int | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)
