"""Domain errors, typed here and mapped to HTTP only in `api_funcs` (how a refusal is declared:
docs/http.md#problem-bodies). Each `error_code` is stable; a `title` is safe to show anyone: no
address, PIN, password, token or secret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

# The JSON shape of an extension member, as the document declares it.
MemberType = Literal["number", "date-time", "field-errors"]


class DomainError(Exception):
    """A refusal with a stable error code; `members` become problem-details extension members."""

    status: int
    error_code: str
    title: str
    # Whole seconds, sent as `Retry-After`.
    retry_after: int | None = None
    # The extension members it always carries, and those it never sends.
    member_types: ClassVar[Mapping[str, MemberType]] = {}
    never_members: ClassVar[tuple[str, ...]] = ()
    # The headers it always sends. A refusal with its own error_code declares its own: a
    # category's (Unauthenticated's WWW-Authenticate) is not inherited by another code.
    sends: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "error_code" in cls.__dict__ and "sends" not in cls.__dict__:
            cls.sends = ("Retry-After",) if cls.retry_after is not None else ()

    def __init__(
        self, *, title: str | None = None, headers: dict[str, str] | None = None, **members: Any
    ) -> None:
        if title is not None:
            self.title = title
        self.headers = dict(headers or {})
        if self.retry_after is not None:
            self.headers.setdefault("Retry-After", str(self.retry_after))
        self.members = members
        super().__init__(self.title)


class BadRequest(DomainError):
    status = 400
    error_code = "BAD_REQUEST"
    title = "The request was refused."


class ValidationFailed(BadRequest):
    """Shaped as any body validation failure (docs/http.md): the field named, never its value."""

    error_code = "VALIDATION_FAILED"
    title = "The request body is not valid."
    member_types: ClassVar[Mapping[str, MemberType]] = {"errors": "field-errors"}

    def __init__(
        self,
        field: str = "body",
        message: str = "invalid",
        *,
        title: str | None = None,
        errors: list[dict[str, str]] | None = None,
    ) -> None:
        """One named field (or, as `errors`, several); `title` when the fault is a header's."""
        super().__init__(title=title, errors=errors or [{"field": field, "message": message}])


class Unauthenticated(DomainError):
    status = 401
    error_code = "UNAUTHENTICATED"
    title = "Authentication is required."
    sends = ("WWW-Authenticate",)


class Forbidden(DomainError):
    status = 403
    error_code = "FORBIDDEN"
    title = "Forbidden."


class NotFound(DomainError):
    status = 404
    error_code = "NOT_FOUND"
    title = "Not found."


class Conflict(DomainError):
    status = 409
    error_code = "CONFLICT"
    title = "The request conflicts with the current state."


class Refusal(DomainError):
    status = 422
    error_code = "UNPROCESSABLE"
    title = "The request was refused."


class TooManyAttempts(DomainError):
    status = 429
    error_code = "TOO_MANY_ATTEMPTS"
    title = "Too many attempts; try again later."


class Fault(DomainError):
    """The system could not decide; retrying later may succeed."""

    status = 503
    error_code = "UNAVAILABLE"
    title = "The service is temporarily unavailable."


class DatabaseFault(Fault):
    """Raised in place of a driver error (shared/db/faults.py); `driver_error` is that error's
    type, by name, all a log line may say of it: its text can carry SQL, values, an address."""

    def __init__(self, driver_error: str) -> None:
        super().__init__()
        self.driver_error = driver_error


class LockTimeout(DatabaseFault):
    """ADR-0050 D5: a lock wait ran out; a fault, never the 422."""

    error_code = "LOCK_TIMEOUT"
    title = "The request could not be processed in time; try again."
    retry_after = 1


class DatabaseUnavailable(DatabaseFault):
    """The database could not be reached, did not answer within its bound, or had no pooled
    connection free in time: nothing was decided."""

    error_code = "DATABASE_UNAVAILABLE"
    title = "The database is unavailable; nothing changed. Try again shortly."
    retry_after = 5


class TransactionRolledBack(DatabaseUnavailable):
    """A deadlock's victim or a serialization failure: running it again may succeed."""


class CommitOutcomeUnknown(DatabaseFault):
    """The connection failed during the COMMIT of a write with no Idempotency-Key to ask again
    (shared.db.uow.commit_unit): never "nothing changed", which is not known. A writer declares
    its own title, saying how the caller finds out."""

    error_code = "COMMIT_OUTCOME_UNKNOWN"
    title = (
        "The database connection was lost while the change was committed, so whether it "
        "took effect is not known. Check before making it again."
    )
    retry_after = 5
