"""The access line `azurebank serve` writes in place of uvicorn's (docs/money.md#logging), from
the ASGI scope, whose `path` never holds the query string, where a client may put a token: not
filtered out of uvicorn's line, whose arguments hold the target as sent, in uvicorn's order."""

from __future__ import annotations

import logging
import time
from urllib.parse import quote

from starlette.types import Receive, Scope, Send

from api_funcs.http_middleware import HttpMiddleware, WatchedSend

log = logging.getLogger("azurebank.access")

# RFC 3986 pchar and "/": the path is written percent-encoded, so a decoded CR, LF or control
# character the client sent as %0A cannot forge a line of the log.
_PATH_SAFE = "/!$&'()*+,;=:@-._~"


class AccessLog(HttpMiddleware):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        began = time.perf_counter()
        sent = WatchedSend(send)
        try:
            await self.app(scope, receive, sent)
        finally:
            log.info(
                "%s %s %s %.1f ms",
                scope["method"],
                quote(scope["path"], safe=_PATH_SAFE, errors="backslashreplace"),
                sent.status if sent.status is not None else "-",
                (time.perf_counter() - began) * 1000,
            )
