"""`azurebank serve`: uvicorn serving the FastAPI app, plus the Api runner's loop
(NoticeRelayService, ADR-0048 D1) started and stopped with the app's lifespan."""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from shared.cli import exits
from shared.clock import Clock
from shared.notices.relay_loop import NoticeRelayService
from shared.settings import Settings, load_settings, require_host

if TYPE_CHECKING:
    from fastapi import FastAPI


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("must be a port number from 1 to 65535")
    return int(text)


def register(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API with uvicorn (and deliver notices when Notices__Runner=Api)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=_port, default=7071, help="1 to 65535 (default 7071)")
    serve.set_defaults(run=_serve)


def build_served_app(settings: Settings, *, clock: Clock | None = None) -> FastAPI:
    """The app as `serve` runs it: the one FastAPI app with the relay loop in its lifespan.
    The loop is always registered (D1), so every API host reads the flag and says what it does."""
    from api_funcs.access_log import AccessLog
    from api_funcs.app import create_app
    from api_funcs.context import AppContext
    from api_funcs.telemetry import host_telemetry
    from shared.cli.runtime import database_url

    # ADR-0048 D6: refused before anything is served; main() turns this into exit 78.
    require_host(settings, "api")
    context = AppContext(settings, database_url=database_url(settings))
    # Built, not connected: a driver this install lacks is exit 78 now, not a 500 per request.
    context.engine  # noqa: B018
    if clock is not None:
        context.clock = clock
    context.telemetry = host_telemetry(settings, database_url=context.url, clock=context.clock)
    app = create_app(context)
    # Outermost of the app's middleware, so the line has the status the client got.
    app.add_middleware(AccessLog)
    relay = NoticeRelayService(
        settings, database_url=context.url, clock=context.clock, telemetry=context.telemetry
    )
    attach_relay(app, relay)
    return app


def attach_relay(app: FastAPI, relay: NoticeRelayService) -> None:
    """Start the relay after the app's own startup and stop it before the app's shutdown."""
    app.state.notice_relay = relay
    app.router.lifespan_context = _with_relay(app.router.lifespan_context, relay)


def _with_relay(
    inner: Callable[[Any], AbstractAsyncContextManager[Any]], relay: NoticeRelayService
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state:
            relay.start()
            try:
                yield state
            finally:
                await relay.stop()

    return lifespan


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    app = build_served_app(load_settings())
    try:
        # access_log=False: uvicorn's line writes the query string (a token can ride in it);
        # the app's AccessLog writes method, path, status and duration instead.
        uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    except SystemExit as exc:
        # uvicorn exits 3 when it cannot bind or start; 3 is no code of ours (docs/cli.md).
        if exc.code in (None, 0):
            return exits.OK
        print(
            f"azurebank serve: could not serve on {args.host}:{args.port} (see the line above). "
            "Fix: free the port, or pass --host/--port.",
            file=sys.stderr,
        )
        return exits.FAILURE
    return exits.OK
