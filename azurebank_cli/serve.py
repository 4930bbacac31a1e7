"""`azurebank serve`: uvicorn serving the app as api_funcs.served builds it (the FastAPI app plus
the Api runner's loop, ADR-0048 D1)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from azurebank_cli import exits
from shared.settings import load_settings


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


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api_funcs.served import build_served_app

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
