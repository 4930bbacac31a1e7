"""The one FastAPI app, the only router (docs/architecture.md), and its API page."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from api_funcs.middleware import BodyLimit, UnhandledErrors
from api_funcs.problems import install_problem_handlers
from api_funcs.telemetry_recorder import OpenTelemetryRecorder, RequestSpans
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
    # Composed once, by the host, on the first request that reads a service: health reads none.
    compose: Callable[[], Services]
    # `serve` (api) or the Functions host (function): who delivers notices, whether the page is on.
    host: HostedKind = "api"
    # The host's (api_funcs.telemetry.host_telemetry), read without composing the services.
    telemetry: Telemetry = NO_TELEMETRY


def _router(feature: str) -> APIRouter:
    # Imported when an app that routes the feature is built; as import statements, not by name,
    # so the package's import graph shows every route module it ships.
    if feature == "health":
        from api_funcs.routes.health import router
    elif feature == "accounts":
        from api_funcs.routes.accounts import router
    elif feature == "pin":
        from api_funcs.routes.pin import router
    elif feature == "transactions":
        from api_funcs.routes.transactions import router
    else:
        raise ValueError(f"no feature {feature!r} (api_funcs/routes)")
    return router


def create_app(context: AppContext, features: Sequence[str] = FEATURES) -> FastAPI:
    """The app over `context`, routing `features`: all, or the called Function's on Azure."""
    functions_host = context.host == "function"
    enabled = context.settings.ApiDocs.Enabled
    docs = not functions_host if enabled is None else enabled
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
        # Function name, route name and operationId are one name (docs/architecture.md).
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.ctx = context
    app.add_middleware(BodyLimit)
    # Around the body limit, so a span covers its refusals too.
    if isinstance(context.telemetry, OpenTelemetryRecorder):
        app.add_middleware(RequestSpans, tracer=context.telemetry.tracer)
    # Added last, so outermost of the app's own: it answers whatever the rest let escape.
    app.add_middleware(UnhandledErrors)
    install_problem_handlers(app)
    for feature in features:
        app.include_router(_router(feature))
    _declare_only_real_refusals(app)
    if docs:
        install_docs_page(app)
    return app


def _declare_only_real_refusals(app: FastAPI) -> None:
    """Drop FastAPI's 422 `HTTPValidationError`: a bad body is 400 VALIDATION_FAILED here."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        # FastAPI's document, cached until the routes change: a walk of a walked one drops nothing.
        schema = build()
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                responses = operation.get("responses", {})
                if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                    del responses["422"]
        components = schema.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


# The API page, Swagger UI, its every asset served by the app from the `swagger-ui-bundle-v2`
# package, no CDN, for machines that may be offline (docs/settings.md).
PAGE = "/api/docs"
# The files the page loads (and their source maps, which a browser's tools ask for): nothing
# else of the bundle is served, so its sample page and its Petstore initializer stay out.
_JS, _CSS, _ICON = "swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"
ASSETS = frozenset({_JS, f"{_JS}.map", _CSS, f"{_CSS}.map", _ICON})
# A browser refuses any other origin, so a page that tried a CDN would show it at once.
_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)


def install_docs_page(app: FastAPI) -> None:
    """The page and its assets, as plain routes: no operation of the API, nor of its document."""
    from swagger_ui_bundle import swagger_ui_path

    bundle = Path(str(swagger_ui_path))

    async def page(_request: Request) -> Response:
        html = get_swagger_ui_html(
            openapi_url=str(app.openapi_url),
            title=f"{app.title} — API",
            swagger_js_url=f"{PAGE}/{_JS}",
            swagger_css_url=f"{PAGE}/{_CSS}",
            swagger_favicon_url=f"{PAGE}/{_ICON}",
            # Swagger UI's default validator is an image from an outside service.
            swagger_ui_parameters={"validatorUrl": None},
        )
        html.headers["Content-Security-Policy"] = _POLICY
        return html

    async def asset(request: Request) -> Response:
        name = request.path_params["asset"]
        if name not in ASSETS:
            # The app's own 404 problem (problems.py answers HTTPException).
            raise HTTPException(404, "Not Found")
        return FileResponse(bundle / name, headers={"Cache-Control": "public, max-age=86400"})

    for path, endpoint, name in ((PAGE, page, "docs"), (f"{PAGE}/{{asset}}", asset, "docs_asset")):
        app.add_route(path, endpoint, methods=["GET"], include_in_schema=False, name=name)
