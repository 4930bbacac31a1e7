"""The catch-all: an exception no handler answered becomes a 500 INTERNAL_ERROR problem and one
Error line (problems.log_unhandled), and goes no further. Not an `Exception` handler, which
ServerErrorMiddleware re-raises after, for the server to print whole, message and traceback."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from api_funcs.http_middleware import HttpMiddleware, WatchedSend
from api_funcs.problems import internal_error, log_unhandled, trace_id_of


class UnhandledErrors(HttpMiddleware):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = WatchedSend(send)
        try:
            await self.app(scope, receive, sent)
        except Exception as exc:
            # The traceId the route may already have used (request.state lives in the scope).
            trace = trace_id_of(Request(scope))
            log_unhandled(exc, trace)
            if sent.status is not None:
                # The status is sent: the server closes the connection short of its body,
                # which the client sees as a failed response.
                return
            await internal_error(trace)(scope, receive, send)
