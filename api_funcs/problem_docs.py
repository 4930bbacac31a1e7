"""What each operation declares in the OpenAPI document (DESIGN §5; ADR-0050 Consequences): per
status, a problem+json schema whose `errorCode` is one of the codes that status can carry, the
same list as `x-error-codes`, per code the extension members it always sends, and the headers
those codes send. Every route declares its refusals through `error_code_responses` (the one
helper: identity's and money's routes alike)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api_funcs.problems import PROBLEM_JSON, problem_type

_NUMBER = {"type": "number"}

# The members a code always carries (ADR-0050 D7; DESIGN §5); `remaining` is never sent.
CODE_MEMBERS: dict[str, dict[str, dict[str, Any]]] = {
    "DAILY_LIMIT_EXCEEDED": {
        "limit": _NUMBER,
        "used": _NUMBER,
        "requested": _NUMBER,
        "resetsAt": {"type": "string", "format": "date-time"},
    },
    "INSUFFICIENT_FUNDS": {"available": _NUMBER, "requested": _NUMBER},
    "VALIDATION_FAILED": {
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        }
    },
}
_FORBIDDEN_MEMBERS: dict[str, list[str]] = {"DAILY_LIMIT_EXCEEDED": ["remaining"]}

_RETRY_AFTER = {
    "Retry-After": {
        "description": "Whole seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}
_WWW_AUTHENTICATE = {
    "WWW-Authenticate": {
        "description": "The scheme to authenticate with.",
        "schema": {"type": "string", "enum": ["Bearer"]},
    }
}
# The headers a code always sends (shared.errors: each refusal's `headers`).
CODE_HEADERS: dict[str, dict[str, dict[str, Any]]] = {
    "UNAUTHENTICATED": _WWW_AUTHENTICATE,
    "PIN_LOCKED": _RETRY_AFTER,
    "IDEMPOTENCY_IN_PROGRESS": _RETRY_AFTER,
    "LOCK_TIMEOUT": _RETRY_AFTER,
    "CONCURRENCY_CONFLICT": _RETRY_AFTER,
    "DATABASE_UNAVAILABLE": _RETRY_AFTER,
}
# api_funcs.problems.DatabaseUnavailable: any operation that reads or writes the database can
# meet an outage (every /api operation but health: the bearer check itself reads AspNetUsers).
DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"

_DESCRIPTIONS = {
    400: "The request is malformed.",
    401: "Not authenticated, or a credential (password, PIN, transfer authorization) was not "
    "accepted.",
    403: "The account belongs to someone else.",
    404: "The account or payee does not exist.",
    409: "The request conflicts with the current state.",
    422: "A rule refused the request.",
    429: "Too many wrong PINs.",
    503: "The request could not be decided now; nothing changed.",
}


def _code_schema(status: int, code: str) -> dict[str, Any]:
    members = CODE_MEMBERS.get(code, {})
    schema: dict[str, Any] = {
        "type": "object",
        "required": ["type", "title", "status", "errorCode", "traceId", *members],
        "properties": {
            "type": {"type": "string", "enum": [problem_type(code)]},
            "title": {"type": "string"},
            "status": {"type": "integer", "enum": [status]},
            "errorCode": {"type": "string", "enum": [code]},
            "traceId": {"type": "string"},
            **members,
        },
    }
    forbidden = _FORBIDDEN_MEMBERS.get(code)
    if forbidden:
        schema["not"] = {"anyOf": [{"required": [name]} for name in forbidden]}
    return schema


def error_code_responses(
    codes: Mapping[int, Sequence[str]], *, touches_database: bool = True
) -> dict[int | str, dict[str, Any]]:
    """FastAPI `responses=` for these statuses and codes (each status's codes in rung order),
    plus 503 DATABASE_UNAVAILABLE unless the operation touches no database (health)."""
    out: dict[int | str, dict[str, Any]] = {}
    table = {status: list(names) for status, names in codes.items()}
    if touches_database:
        table.setdefault(503, []).append(DATABASE_UNAVAILABLE)
    for status, names in sorted(table.items()):
        ordered = list(dict.fromkeys(names))
        entry: dict[str, Any] = {
            "description": f"{_DESCRIPTIONS.get(status, 'Refused.')} errorCode: "
            + ", ".join(ordered)
            + ".",
            "content": {
                PROBLEM_JSON: {"schema": {"oneOf": [_code_schema(status, c) for c in ordered]}}
            },
            "x-error-codes": ordered,
        }
        headers = {name: h for code in ordered for name, h in CODE_HEADERS.get(code, {}).items()}
        if headers:
            entry["headers"] = headers
        out[status] = entry
    return out


def idempotency_key_parameter() -> dict[str, Any]:
    """`openapi_extra` for a money operation: the Idempotency-Key header it requires (read by
    the handler itself, so its absence is 400 IDEMPOTENCY_KEY_REQUIRED, not a generic 400)."""
    return {
        "parameters": [
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": True,
                "description": "Unique per intended operation (ADR-0009); a retry with the same "
                "key and body replays the first success with Idempotency-Replayed: true. Sent "
                "once: two of them are 400 VALIDATION_FAILED naming Idempotency-Key.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255},
            }
        ]
    }


REPLAYED_HEADER = {
    "Idempotency-Replayed": {
        "description": "`true` when this is the stored answer to an earlier request with the "
        "same key and body.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
