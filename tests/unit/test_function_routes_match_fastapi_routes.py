"""The named HTTP Functions and the FastAPI app's routes are the same set, so every
operation reachable under uvicorn is reachable (and can be disabled by name) on Azure; and each
Function's own app (its feature's router alone) routes it."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.routing import APIRoute, iter_route_contexts

from api_funcs.app import FEATURES
from api_funcs.functions import OPERATIONS, PAGES
from shared.settings import load_settings
from tests.support.hosts import make_app

Routes = dict[str, tuple[str, frozenset[str]]]


def _fastapi_operations(features: Sequence[str] = FEATURES) -> Routes:
    app = make_app(load_settings({}), db_url="sqlite://", features=features)
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


def test_each_functions_app_routes_its_feature_and_nothing_else() -> None:
    # The host hands a Function only its own route and method, and the Function hands it to
    # the app of its feature (api_funcs.functions): that app must route exactly the
    # operations of that feature, the Function's among them.
    everything = _function_operations()
    for feature in FEATURES:
        ops = {op.name for op in OPERATIONS if op.feature == feature}
        assert ops, f"no Function answers the feature {feature}"
        assert _fastapi_operations((feature,)) == {name: everything[name] for name in ops}
    assert {op.feature for op in OPERATIONS} == set(FEATURES)
    # The pages are answered by the whole app, whose document lists every operation.
    assert {page.feature for page in PAGES} == {None}
