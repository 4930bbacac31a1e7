"""`azurebank serve`: uvicorn serving the app as api_funcs.served builds it (the FastAPI app plus
the Api runner's loop)."""

from __future__ import annotations

import argparse
import signal
from typing import Any

from azurebank_cli import exits
from azurebank_cli.runtime import command, fail, whole_number
from shared.settings import load_settings


def register(sub: Any) -> None:
    what = "serve the HTTP API with uvicorn (and deliver notices when Notices__Runner=Api)"
    serve = command(sub, "serve", _serve, help=what)
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=whole_number(1, 65535, "a port number"),
        default=7071,
        help="1 to 65535 (default 7071)",
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api_funcs.served import build_served_app

    app = build_served_app(load_settings())
    # SIGTERM and SIGINT end `serve` with exit 0 once uvicorn has shut down cleanly: uvicorn
    # restores the handlers it found and raises the signal again, so with the defaults SIGTERM
    # would kill the process (exit 143) after the clean shutdown. These do nothing.
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        # access_log=False: uvicorn's line writes the query string (a token can ride in it);
        # the app's AccessLog writes method, path, status and duration instead.
        uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    except SystemExit as exc:
        # uvicorn exits 3 when it cannot bind or start; 3 is no code of ours (docs/cli.md).
        if exc.code not in (None, 0):
            return fail(
                exits.FAILURE,
                f"azurebank serve: could not serve on {args.host}:{args.port} (see the line "
                "above). Fix: free the port, or pass --host/--port.",
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return exits.OK
