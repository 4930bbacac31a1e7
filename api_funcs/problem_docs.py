"""What each operation declares in the OpenAPI document (docs/http.md): per status, a problem+json
schema per errorCode of the refusal classes it raises, so a new code or member reaches it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api_funcs.problems import PROBLEM_JSON, problem_type
from shared.errors import DatabaseUnavailable, DomainError, LockTimeout, MemberType

_MEMBER_SCHEMAS: dict[MemberType, dict[str, Any]] = {
    "number": {"type": "number"},
    "date-time": {"type": "string", "format": "date-time"},
    "field-errors": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["field", "message"],
            "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
_HEADER_SCHEMAS: dict[str, dict[str, Any]] = {
    "Retry-After": {
        "description": "Whole seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 1},
    },
    "WWW-Authenticate": {
        "description": "The scheme to authenticate with.",
        "schema": {"type": "string", "enum": ["Bearer"]},
    },
}

Refusals = Sequence[type[DomainError]]

_DESCRIPTIONS = {
    400: "The request is malformed.",
    401: "Not authenticated, or a credential (password, PIN, transfer authorization) was not "
    "accepted.",
    403: "The account belongs to someone else.",
    404: "The account or payee does not exist.",
    409: "The request conflicts with the current state.",
    422: "A rule refused the request.",
    429: "Too many wrong PINs.",
    # Not "nothing changed": an OUTCOME_UNKNOWN's or COMMIT_OUTCOME_UNKNOWN's commit may be done.
    503: "The request could not be answered now; each code's title says what is known.",
}


def _code_schema(refusal: type[DomainError]) -> dict[str, Any]:
    members = {name: _MEMBER_SCHEMAS[kind] for name, kind in refusal.member_types.items()}
    code = refusal.error_code
    schema: dict[str, Any] = {
        "type": "object",
        "required": ["type", "title", "status", "errorCode", "traceId", *members],
        "properties": {
            "type": {"type": "string", "enum": [problem_type(code)]},
            "title": {"type": "string"},
            "status": {"type": "integer", "enum": [refusal.status]},
            "errorCode": {"type": "string", "enum": [code]},
            "traceId": {"type": "string"},
            **members,
        },
    }
    if refusal.never_members:
        schema["not"] = {"anyOf": [{"required": [name]} for name in refusal.never_members]}
    return schema


def error_code_responses(
    refusals: Refusals, *, touches_database: bool = True
) -> dict[int | str, dict[str, Any]]:
    """FastAPI `responses=` for `refusals`, and the database's faults if the operation has one."""
    # Any statement may wait on a lock (SQL Server's reads too) or find no database.
    faults = (LockTimeout, DatabaseUnavailable) if touches_database else ()
    by_status: dict[int, dict[str, type[DomainError]]] = {}
    for refusal in (*refusals, *faults):
        by_status.setdefault(refusal.status, {}).setdefault(refusal.error_code, refusal)
    out: dict[int | str, dict[str, Any]] = {}
    for status, codes in sorted(by_status.items()):
        described = _DESCRIPTIONS.get(status, "Refused.")
        headers = {h: _HEADER_SCHEMAS[h] for r in codes.values() for h in r.sends}
        out[status] = {
            "description": f"{described} errorCode: {', '.join(codes)}.",
            "content": {
                PROBLEM_JSON: {"schema": {"oneOf": [_code_schema(r) for r in codes.values()]}}
            },
            "x-error-codes": list(codes),
            **({"headers": headers} if headers else {}),
        }
    return out
