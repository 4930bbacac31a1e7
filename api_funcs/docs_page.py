"""`GET /api/docs`: Swagger UI over `/api/openapi.json`, every asset served by the app from the
`swagger-ui-bundle-v2` package, no CDN, for machines that may be offline (docs/settings.md)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from shared.settings import Settings

PAGE = "/api/docs"
# The files the page loads (and their source maps, which a browser's tools ask for): nothing
# else of the bundle is served, so its sample page and its Petstore initializer stay out.
ASSETS = frozenset(
    {
        "swagger-ui-bundle.js",
        "swagger-ui-bundle.js.map",
        "swagger-ui.css",
        "swagger-ui.css.map",
        "favicon-32x32.png",
    }
)
# A browser refuses any other origin, so a page that tried a CDN would show it at once.
_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)


def docs_page_on(settings: Settings, *, functions_host: bool) -> bool:
    """`ApiDocs__Enabled` when set; otherwise on under `serve` and off under the Functions host."""
    enabled = settings.ApiDocs.Enabled
    return (not functions_host) if enabled is None else enabled


def install_docs_page(app: FastAPI) -> None:
    """The page and its assets, as plain routes: no operation of the API, nor of its document."""
    from swagger_ui_bundle import swagger_ui_path

    bundle = Path(str(swagger_ui_path))

    async def page(_request: Request) -> Response:
        html = get_swagger_ui_html(
            openapi_url=str(app.openapi_url),
            title=f"{app.title} — API",
            swagger_js_url=f"{PAGE}/swagger-ui-bundle.js",
            swagger_css_url=f"{PAGE}/swagger-ui.css",
            swagger_favicon_url=f"{PAGE}/favicon-32x32.png",
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

    app.add_route(PAGE, page, methods=["GET"], include_in_schema=False, name="docs")
    app.add_route(
        f"{PAGE}/{{asset}}", asset, methods=["GET"], include_in_schema=False, name="docs_asset"
    )
