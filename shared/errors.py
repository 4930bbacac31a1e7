"""Domain errors, typed here and mapped to HTTP only in `api_funcs` (DESIGN §2).

    DomainError                       every refusal the domain can answer
    ├── NotFound / Forbidden          an account or payee the caller may not use
    ├── Unauthenticated               no verified identity
    ├── Refusal                       a rule said no (422-shaped), with extension members
    └── Fault                         the system could not decide (e.g. LOCK_TIMEOUT, 503)

Each carries a stable `error_code` (DESIGN §5) and a `title` that is safe to show anyone: no
address, PIN, password, token or secret ever goes into one.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A refusal with a stable error code; `members` become problem-details extension members."""

    status: int = 400
    error_code: str = "BAD_REQUEST"
    title: str = "The request was refused."

    def __init__(
        self,
        error_code: str | None = None,
        title: str | None = None,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        **members: Any,
    ) -> None:
        if error_code is not None:
            self.error_code = error_code
        if title is not None:
            self.title = title
        if status is not None:
            self.status = status
        self.headers = headers or {}
        self.members = members
        super().__init__(self.title)


class NotFound(DomainError):
    status = 404
    error_code = "NOT_FOUND"
    title = "Not found."


class Forbidden(DomainError):
    status = 403
    error_code = "FORBIDDEN"
    title = "Forbidden."


class Unauthenticated(DomainError):
    status = 401
    error_code = "UNAUTHENTICATED"
    title = "Authentication is required."


class Refusal(DomainError):
    status = 422
    error_code = "UNPROCESSABLE"
    title = "The request was refused."


class Conflict(DomainError):
    status = 409
    error_code = "CONFLICT"
    title = "The request conflicts with the current state."


class Fault(DomainError):
    """The system could not decide; retrying later may succeed."""

    status = 503
    error_code = "UNAVAILABLE"
    title = "The service is temporarily unavailable."
