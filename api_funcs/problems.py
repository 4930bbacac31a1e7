"""Problem details (RFC 9457) for every refusal: the only place a domain error becomes HTTP.

Bodies carry `type`, `title`, `status`, `errorCode`, `traceId` and the error's extension members.
Nothing the caller sent is echoed back beyond a field's name: no PIN, password, token or address.
"""

from __future__ import annotations

import logging
import uuid
from decimal import Decimal
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.errors import DomainError

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://azurebank.example/problems/"
log = logging.getLogger("azurebank.api")


def problem_type(error_code: str) -> str:
    """The distinct `type` URI of an errorCode (DESIGN §5)."""
    return TYPE_BASE + error_code.lower().replace("_", "-")


def _json_number(value: Any) -> Any:
    # DESIGN §5: figures travel as JSON numbers, never strings.
    if isinstance(value, Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    return value


def problem_response(
    status: int,
    error_code: str,
    title: str,
    *,
    trace_id: str | None = None,
    headers: dict[str, str] | None = None,
    **members: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": problem_type(error_code),
        "title": title,
        "status": status,
        "errorCode": error_code,
        "traceId": trace_id or uuid.uuid4().hex,
    }
    body.update({k: _json_number(v) for k, v in members.items()})
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def trace_id_of(request: Request) -> str:
    trace: str | None = getattr(request.state, "trace_id", None)
    if trace is None:
        trace = uuid.uuid4().hex
        request.state.trace_id = trace
    return trace


def _field_name(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "header", "path")]
    return ".".join(parts) or "body"


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def _domain(request: Request, exc: DomainError) -> JSONResponse:
        return problem_response(
            exc.status,
            exc.error_code,
            exc.title,
            trace_id=trace_id_of(request),
            headers=exc.headers,
            **exc.members,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Name the fields, never their values: a body may hold a PIN or a password.
        errors = [
            {
                # A JSON decode error's location is a character offset: the field is the body.
                "field": "body"
                if e.get("type") == "json_invalid"
                else _field_name(tuple(e.get("loc", ()))),
                "message": e.get("msg", "invalid"),
            }
            for e in exc.errors()
        ]
        return problem_response(
            400,
            "VALIDATION_FAILED",
            "The request body is not valid.",
            trace_id=trace_id_of(request),
            errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        return problem_response(
            exc.status_code,
            code,
            str(exc.detail) if exc.status_code < 500 else "The request failed.",
            trace_id=trace_id_of(request),
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The type only: a driver's message can echo SQL parameters.
        log.error("Unhandled %s (trace %s)", type(exc).__name__, trace_id_of(request))
        return problem_response(
            500, "INTERNAL_ERROR", "An unexpected error occurred.", trace_id=trace_id_of(request)
        )
