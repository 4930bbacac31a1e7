"""`azurebank serve`: uvicorn serving the FastAPI app (plus, in a later step, the Api runner)."""

from __future__ import annotations

import argparse
from typing import Any

from shared.cli import exits
from shared.settings import load_settings, require_host


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("must be a port number from 1 to 65535")
    return int(text)


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="serve the HTTP API with uvicorn")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=7071)
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api_funcs.app import create_app
    from api_funcs.context import AppContext
    from shared.cli.runtime import database_url

    settings = load_settings()
    require_host(settings, "api")
    app = create_app(AppContext(settings, database_url=database_url(settings)))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return exits.OK
