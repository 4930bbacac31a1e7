"""Problem details (RFC 9457): the one place a domain error becomes HTTP. No exception leaves the
app for the server to print (a driver's text carries SQL): each is answered and logged by type."""

from __future__ import annotations

import logging
import os
import sys
import traceback
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api_funcs.decimal_json import ExactJSONResponse
from shared.errors import (
    CommitOutcomeUnknown,
    DatabaseFault,
    DomainError,
    LockTimeout,
    TransactionRolledBack,
    ValidationFailed,
)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://azurebank.example/problems/"
log = logging.getLogger("azurebank.api")


def stack_of(exc: BaseException, limit: int = 40) -> str:
    """An exception's frames, innermost first, as file:line:function: never its text or locals."""
    frames = [(f.f_code, line) for f, line in traceback.walk_tb(exc.__traceback__)]
    return " < ".join(
        f"{_importable(code.co_filename)}:{line}:{code.co_qualname}"
        for code, line in reversed(frames[-limit:])
    )


# The checkout or install that holds api_funcs and shared, whether or not it is on sys.path.
_APP_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _importable(filename: str) -> str:
    paths = {_APP_ROOT, *(os.path.abspath(p) for p in sys.path if p)}
    roots = sorted(paths, key=len, reverse=True)
    return next(
        (filename[len(r) + 1 :] for r in roots if filename.startswith(r + os.sep)), filename
    )


def problem_type(error_code: str) -> str:
    """The distinct `type` URI of an errorCode (docs/http.md)."""
    return TYPE_BASE + error_code.lower().replace("_", "-")


def problem_response(
    status: int,
    error_code: str,
    title: str,
    trace_id: str | None = None,
    headers: Mapping[str, str] | None = None,
    **members: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": problem_type(error_code),
        "title": title,
        "status": status,
        "errorCode": error_code,
        "traceId": trace_id or uuid.uuid4().hex,
        **members,
    }
    return ExactJSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def trace_id_of(request: Request) -> str:
    if getattr(request.state, "trace_id", None) is None:
        request.state.trace_id = uuid.uuid4().hex
    return request.state.trace_id


def _field_name(error: Any) -> str:
    if error.get("type") == "json_invalid":
        # Its location is a character offset: the field is the body.
        return "body"
    parts = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "header", "path")]
    return ".".join(parts) or "body"


def install_problem_handlers(app: FastAPI) -> None:
    app.exception_handler(DomainError)(_domain)
    app.exception_handler(DatabaseFault)(_database_fault)
    app.exception_handler(RequestValidationError)(_validation)
    app.exception_handler(StarletteHTTPException)(_http)
    app.exception_handler(SQLAlchemyError)(unhandled)


def refusal_problem(error: DomainError, trace_id: str | None = None) -> JSONResponse:
    return problem_response(
        error.status, error.error_code, error.title, trace_id, error.headers, **error.members
    )


async def _domain(request: Request, exc: DomainError) -> JSONResponse:
    # Counted by operation (route name), for the refusals an operator alerts on.
    route = request.scope.get("route")
    request.app.state.ctx.telemetry.refused(str(getattr(route, "name", "unrouted")), exc)
    return refusal_problem(exc, trace_id_of(request))


async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    # Name the fields, never their values: a body may hold a PIN or a password.
    errors = [{"field": _field_name(e), "message": e.get("msg", "invalid")} for e in exc.errors()]
    return refusal_problem(ValidationFailed(errors=errors), trace_id_of(request))


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
    title = str(exc.detail) if exc.status_code < 500 else "The request failed."
    return problem_response(exc.status_code, code, title, trace_id_of(request), exc.headers)


# How each fault is logged, the first that matches: a rollback (a deadlock's or a serialization
# failure's, outside the money's retry loop) changed nothing; a lost COMMIT's outcome is unknown.
_FAULT_LOGS: tuple[tuple[type[DatabaseFault], int, str], ...] = (
    (TransactionRolledBack, logging.WARNING, "Transaction rolled back by the server"),
    (LockTimeout, logging.WARNING, "Lock wait ran out"),
    (CommitOutcomeUnknown, logging.ERROR, "Connection lost during COMMIT, outcome unknown"),
    (DatabaseFault, logging.ERROR, "Database unavailable"),
)


async def _database_fault(request: Request, exc: DatabaseFault) -> JSONResponse:
    level, what = next((lvl, what) for kind, lvl, what in _FAULT_LOGS if isinstance(exc, kind))
    log.log(level, "%s: %s (trace %s)", what, exc.driver_error, trace_id_of(request))
    return await _domain(request, exc)


async def unhandled(request: Request, exc: BaseException) -> JSONResponse:
    """The 500 INTERNAL_ERROR, logged by the exception's type and frames: never its message (a
    driver's echoes SQL parameters) nor exc_info (a handler would print the message with it)."""
    trace_id = trace_id_of(request)
    log.error("Unhandled %s (trace %s) at %s", type(exc).__name__, trace_id, stack_of(exc))
    return problem_response(500, "INTERNAL_ERROR", "An unexpected error occurred.", trace_id)
