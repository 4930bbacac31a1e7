"""The named HTTP Functions and the FastAPI app's routes are the same set, so every
operation reachable under uvicorn is reachable (and can be disabled by name) on Azure."""

from __future__ import annotations

from fastapi.routing import APIRoute, iter_route_contexts

from api_funcs.functions import OPERATIONS
from shared.settings import load_settings
from tests.support.hosts import make_app


def _fastapi_operations() -> dict[str, tuple[str, frozenset[str]]]:
    app = make_app(load_settings({}), db_url="sqlite://")
    routes: dict[str, tuple[str, frozenset[str]]] = {}
    # FastAPI 0.16x resolves included routers lazily: app.routes holds the router, not its routes.
    for context in iter_route_contexts(app.routes):
        if not isinstance(context.original_route, APIRoute):
            continue  # the OpenAPI document, not an operation
        path, name = context.path or "", context.name or ""
        assert path.startswith("/api/"), f"{name} is served outside /api: {path}"
        assert name not in routes, f"two FastAPI routes are named {name}"
        routes[name] = (path, frozenset(context.methods or ()))
    return routes


def _function_operations() -> dict[str, tuple[str, frozenset[str]]]:
    # The host's routePrefix "api" is added in front of each Function's route (host.json).
    return {op.name: (f"/api/{op.route}", frozenset(op.methods)) for op in OPERATIONS}


def test_function_names_are_unique() -> None:
    assert len({op.name for op in OPERATIONS}) == len(OPERATIONS)


def test_the_functions_and_the_fastapi_routes_are_the_same_named_set() -> None:
    assert _function_operations() == _fastapi_operations()


def test_the_openapi_document_is_served_under_api_but_is_no_operation() -> None:
    app = make_app(load_settings({}), db_url="sqlite://")
    assert app.openapi_url == "/api/openapi.json"
    assert "openapi" not in {op.name for op in OPERATIONS}
