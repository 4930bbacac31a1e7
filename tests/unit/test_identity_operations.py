"""The identity operations are named Functions handing to the one FastAPI app (docs/http.md):
`accounts`, and `pin_enrol` / `pin_change` as two Functions on one route told apart by method;
and the OpenAPI document declares each status and errorCode they can answer as problem+json."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api_funcs.functions import OPERATIONS
from shared.settings import load_settings
from tests.support.hosts import make_app


def _flat(routes: list[Any]) -> list[Any]:
    # FastAPI 0.165 keeps an included router behind a wrapper holding `original_router`.
    out: list[Any] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        out.extend(_flat(inner.routes) if inner is not None else [route])
    return out


def test_every_operation_is_a_fastapi_route_of_the_same_name_route_and_methods() -> None:
    app = make_app(load_settings({}))
    routes = {
        getattr(r, "name", None): (getattr(r, "path", ""), sorted(getattr(r, "methods", ())))
        for r in _flat(app.routes)
    }
    for op in OPERATIONS:
        assert routes[op.name] == (f"/api/{op.route}", sorted(op.methods))
    # The Function routes and the FastAPI routes are the same set.
    # The OpenAPI document and the API page (api_funcs/app.py) are no operation.
    pages = {"openapi", "docs", "docs_asset"}
    assert {n for n in routes if n not in pages} == {op.name for op in OPERATIONS}


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return make_app(load_settings({})).openapi()


@pytest.mark.parametrize(
    ("path", "method", "success", "refusals"),
    [
        (
            "/api/accounts",
            "get",
            "200",
            {"401": ["UNAUTHENTICATED"], "503": ["LOCK_TIMEOUT", "DATABASE_UNAVAILABLE"]},
        ),
        (
            "/api/pin",
            "post",
            "201",
            {
                "401": ["UNAUTHENTICATED", "INVALID_PASSWORD"],
                "409": ["PIN_ALREADY_ENROLLED"],
                "400": ["VALIDATION_FAILED"],
                "503": [
                    "AUDIT_CHAIN_UNAVAILABLE",
                    "COMMIT_OUTCOME_UNKNOWN",
                    "LOCK_TIMEOUT",
                    "DATABASE_UNAVAILABLE",
                ],
            },
        ),
        (
            "/api/pin",
            "put",
            "200",
            {
                "401": ["UNAUTHENTICATED", "INVALID_PIN"],
                "422": ["PIN_REQUIRED"],
                "429": ["PIN_LOCKED"],
                "400": ["VALIDATION_FAILED"],
                "503": [
                    "AUDIT_CHAIN_UNAVAILABLE",
                    "COMMIT_OUTCOME_UNKNOWN",
                    "LOCK_TIMEOUT",
                    "DATABASE_UNAVAILABLE",
                ],
            },
        ),
    ],
)
def test_openapi_declares_each_status_and_error_code_as_problem_json(
    openapi: dict[str, Any],
    path: str,
    method: str,
    success: str,
    refusals: dict[str, list[str]],
) -> None:
    responses = openapi["paths"][path][method]["responses"]
    assert set(responses) == {success, *refusals}  # and nothing FastAPI invented (its 422)
    for status, codes in refusals.items():
        # In rung order, each code with a schema of its own (api_funcs.problem_docs).
        assert responses[status]["x-error-codes"] == codes
        schema = responses[status]["content"]["application/problem+json"]["schema"]
        assert [s["properties"]["errorCode"]["enum"] for s in schema["oneOf"]] == [
            [code] for code in codes
        ]
    if "429" in refusals:
        assert "Retry-After" in responses["429"]["headers"]
    assert "HTTPValidationError" not in json.dumps(openapi)
