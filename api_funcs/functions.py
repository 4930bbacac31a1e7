"""One named HTTP Function per operation, each handing its request to its feature's app."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import azure.functions as func

from api_funcs.long_lived import long_lived_build

if TYPE_CHECKING:
    from shared.bootstrap import Host


@dataclass(frozen=True)
class Operation:
    name: str  # the Function's name, and the FastAPI route's name
    route: str  # under the host's routePrefix "api"
    methods: tuple[str, ...]
    feature: str | None  # the module of api_funcs/routes that answers it; None: the whole app
    auth_level: func.AuthLevel = func.AuthLevel.FUNCTION


# docs/http.md lists them. A test pins that these and the FastAPI routes are the same set.
OPERATIONS: tuple[Operation, ...] = (
    Operation("health", "health", ("GET",), "health", func.AuthLevel.ANONYMOUS),
    # The platform's health check calls it with no key (docs/operations.md).
    Operation("ready", "health/ready", ("GET",), "health", func.AuthLevel.ANONYMOUS),
    Operation("accounts", "accounts", ("GET",), "accounts"),
    # Two Functions on one route, told apart by method (each can be disabled on its own).
    Operation("pin_enrol", "pin", ("POST",), "pin"),
    Operation("pin_change", "pin", ("PUT",), "pin"),
    Operation("mint", "transactions/transfer/authorizations", ("POST",), "transactions"),
    Operation("transfer", "transactions/transfer", ("POST",), "transactions"),
    Operation("internal_transfer", "transactions/internal-transfer", ("POST",), "transactions"),
    Operation("deposit", "transactions/deposit", ("POST",), "transactions"),
    Operation("withdrawal", "transactions/withdrawal", ("POST",), "transactions"),
    Operation("allowance", "transactions/allowance", ("GET",), "transactions"),
)

# No operation, but reached on Azure only through a Function: the API page and its document,
# anonymous like any page, and 404 unless ApiDocs__Enabled turns them on (api_funcs/app.py).
PAGES: tuple[Operation, ...] = (
    Operation("docs", "docs/{*asset}", ("GET",), None, func.AuthLevel.ANONYMOUS),
    Operation("openapi", "openapi.json", ("GET",), None, func.AuthLevel.ANONYMOUS),
)


def blueprint(host: Host) -> func.Blueprint:
    """Every operation and page as its own Function, over the `host` the timer shares."""

    @functools.cache
    def asgi(feature: str | None) -> func.AsgiMiddleware:
        # Built on the feature's first request, never at import: a cold instance indexes its
        # Functions without importing FastAPI, the routes or the ORM (bench/cold_start.py).
        with long_lived_build():
            from api_funcs.app import FEATURES, AppContext, create_app

            context = AppContext(host.settings, host.services, "function", host.telemetry)
            features = FEATURES if feature is None else (feature,)
            return func.AsgiMiddleware(create_app(context, features))

    bp = func.Blueprint()

    def register(op: Operation) -> None:
        answered_once = False

        async def handler(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
            nonlocal answered_once
            app = asgi(op.feature)
            # What the first request imports and builds (the driver, PyJWT, the ORM, the
            # services) lives for the process: built like the app, without the collector's walks.
            with contextlib.nullcontext() if answered_once else long_lived_build():
                response = await app.handle_async(req, context)
            answered_once = True
            return response

        handler.__name__ = op.name  # azure.functions names the Function after its handler
        bp.route(route=op.route, methods=list(op.methods), auth_level=op.auth_level)(handler)

    for op in (*OPERATIONS, *PAGES):
        register(op)
    return bp
