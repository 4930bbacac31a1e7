"""The app `azurebank serve` runs: the one app with the Api runner's loop (ADR-0048 D1)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from starlette.types import Receive, Scope

from api_funcs.app import AppContext, create_app
from api_funcs.middleware import HttpMiddleware, WatchedSend
from api_funcs.telemetry import host_telemetry
from shared.bootstrap import Host
from shared.notices.hosted import NoticeRelayService
from shared.settings import Settings

access_log = logging.getLogger("azurebank.access")
# RFC 3986 pchar and "/": the path is written percent-encoded, so a decoded CR, LF or control
# character the client sent as %0A cannot forge a line of the log.
_PATH_SAFE = "/!$&'()*+,;=:@-._~"


def build_served_app(settings: Settings) -> FastAPI:
    """The app with the relay loop in its lifespan; a refused set (ADR-0048 D6) is exit 78 here."""
    host = Host("api", settings, telemetry=host_telemetry())
    host.services()  # built now, so a missing driver is exit 78 too and not a 500 on a request
    app = create_app(AppContext(settings, host.services, "api", host.telemetry))
    # Outermost of the app's middleware, so the line has the status the client got.
    app.add_middleware(AccessLog)
    attach_relay(app, host.relay_loop())
    return app


def attach_relay(app: FastAPI, relay: NoticeRelayService) -> None:
    """Start the relay after the app's own startup and stop it before the app's shutdown."""
    app.state.notice_relay = relay
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state:
            relay.start()
            try:
                yield state
            finally:
                await relay.stop()

    app.router.lifespan_context = lifespan


class AccessLog(HttpMiddleware):
    """`serve`'s access line in place of uvicorn's (docs/money.md#logging), from the ASGI scope,
    whose `path` never holds the query string, where a client may put a token."""

    async def http(self, scope: Scope, receive: Receive, send: WatchedSend) -> None:
        began = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            access_log.info(
                "%s %s %s %.1f ms",
                scope["method"],
                quote(scope["path"], safe=_PATH_SAFE, errors="backslashreplace"),
                send.status if send.status is not None else "-",
                (time.perf_counter() - began) * 1000,
            )
