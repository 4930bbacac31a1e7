"""The one FastAPI app: the only router, served by uvicorn (`azurebank serve`) and, on Azure, by
one named HTTP Function per operation (api_funcs.functions)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI

from api_funcs.docs_page import docs_page_on, install_docs_page
from api_funcs.middleware import BodyLimit, UnhandledErrors
from api_funcs.problems import install_problem_handlers
from api_funcs.telemetry_recorder import install_request_spans
from shared.bootstrap import Services
from shared.settings import HostedKind, Settings
from shared.telemetry import NO_TELEMETRY, Telemetry

OPENAPI_URL = "/api/openapi.json"
# The route modules (api_funcs/routes), one router each, in the order the document lists them.
FEATURES = ("health", "accounts", "pin", "transactions")


@dataclass(frozen=True)
class AppContext:
    """What every request reads, handed to the app by the host that serves it."""

    settings: Settings
    # The host's services, composed (once, by the host) on the first request that reads one: a
    # request that reads none (health) builds no engine and imports no driver.
    compose: Callable[[], Services]
    # `serve` (api) or the Functions host (function): who delivers notices (ADR-0048 D6),
    # whether the API page is on.
    host: HostedKind = "api"
    # The host's (api_funcs.telemetry.host_telemetry), read without composing the services.
    telemetry: Telemetry = NO_TELEMETRY

    @property
    def services(self) -> Services:
        return self.compose()


def create_app(context: AppContext, features: Sequence[str] = FEATURES) -> FastAPI:
    """The app over `context`, routing the `features` given: every one under uvicorn; under the
    Functions host, the one whose Function was called (api_funcs.functions), which is all a
    Function's requests can reach."""
    functions_host = context.host == "function"
    docs = docs_page_on(context.settings, functions_host=functions_host)
    app = FastAPI(
        title="AzureBank Functions",
        version="1.0.0",
        # Under the Functions host the document goes with the page: both off unless turned on.
        openapi_url=None if functions_host and not docs else OPENAPI_URL,
        docs_url=None,
        redoc_url=None,
        # Starlette's slash redirect builds its Location from the Host header the caller sent:
        # `GET /api/health/` is 404, never a redirect to a host of the caller's choosing.
        redirect_slashes=False,
    )
    app.state.ctx = context
    app.add_middleware(BodyLimit)
    # Around the body limit, so a span covers its refusals too; a request that escapes as an
    # exception ends its span as a 500 (the answer UnhandledErrors gives it).
    install_request_spans(app, context.telemetry)
    # Added last, so outermost of the app's own: it answers whatever the rest let escape.
    app.add_middleware(UnhandledErrors)
    install_problem_handlers(app)
    for feature in features:
        app.include_router(_router(feature))
    _declare_only_real_refusals(app)
    if docs:
        install_docs_page(app)
    return app


def _router(feature: str) -> APIRouter:
    # Each feature's module is imported when an app that routes it is built.
    if feature not in FEATURES:
        raise ValueError(f"no feature {feature!r} (api_funcs/routes)")
    router: APIRouter = importlib.import_module(f"api_funcs.routes.{feature}").router
    return router


def _declare_only_real_refusals(app: FastAPI) -> None:
    """FastAPI declares a 422 `HTTPValidationError` on every operation with a body; this app
    answers body errors with 400 VALIDATION_FAILED (problems.py), so that 422 is dropped and
    each operation declares only what it can answer (docs/http.md)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                responses = operation.get("responses", {})
                if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                    del responses["422"]
        components = schema.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
