"""Domain errors, typed here and mapped to HTTP only in `api_funcs`.

    DomainError                       every refusal the domain can answer
    ├── BadRequest (400)              the request itself is malformed
    │   └── ValidationFailed          VALIDATION_FAILED: one named field, its value never echoed
    ├── Unauthenticated (401)         no verified identity, or a credential that did not verify
    ├── Forbidden (403)               an account or payee the caller may not use
    ├── NotFound (404)                no such account or payee
    ├── Conflict (409)                the request conflicts with the current state
    ├── Refusal (422)                 a rule said no, with extension members
    ├── TooManyAttempts (429)         locked out for now (e.g. PIN_LOCKED)
    └── Fault (503)                   the system could not decide
        └── DatabaseFault             a driver error of a kind the domain names (below)
            ├── LockTimeout           LOCK_TIMEOUT: a lock wait ran out
            ├── CommitOutcomeUnknown  COMMIT_OUTCOME_UNKNOWN: the connection failed during COMMIT
            └── DatabaseUnavailable   DATABASE_UNAVAILABLE: the database cannot take the work now
                └── TransactionRolledBack   the server rolled the transaction back (a deadlock)

One way to declare a refusal: subclass the category (it fixes `status`), and set `error_code` and
`title` as class attributes, plus `retry_after` when trying again later may succeed. Extension
members are keyword arguments (a refusal that always carries some names them in its `__init__`
and declares their JSON types in `member_types`). The OpenAPI document is derived from these classes
(api_funcs/problem_docs.py): an operation lists the refusal classes it can raise, and each status,
errorCode, member and header it declares comes from them, so nothing is written twice.
Each carries a stable `error_code` (docs/http.md) and a `title` that is safe to show anyone: no
address, PIN, password, token or secret ever goes into one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

# The JSON shape of an extension member, as the document declares it.
MemberType = Literal["number", "date-time", "field-errors"]


class DomainError(Exception):
    """A refusal with a stable error code; `members` become problem-details extension members.
    Raise a category below, or a refusal declared on one; the category fixes the status."""

    status: int
    error_code: str
    title: str
    # Whole seconds a client should wait before trying again; sent as `Retry-After`.
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
        self,
        error_code: str | None = None,
        title: str | None = None,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        **members: Any,
    ) -> None:
        # The overrides serve a caller outside `shared` that still builds a refusal inline;
        # in `shared` every refusal is a declared class.
        if error_code is not None:
            self.error_code = error_code
        if title is not None:
            self.title = title
        if status is not None:
            self.status = status
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
    """The same shape as any other body validation failure (docs/http.md): the field is named,
    its value never echoed."""

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
        """One named field (or, as `errors`, several); `title` when the fault is no body's
        (a header's)."""
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
    """ADR-0050 D5: the application lock was not granted within DailyLimit__LockTimeoutSeconds,
    or another lock (the audit chain's tail, a row) within Database__LockTimeoutSeconds; a
    fault, never the 422."""

    error_code = "LOCK_TIMEOUT"
    title = "The request could not be processed in time; try again."
    retry_after = 1


class DatabaseUnavailable(DatabaseFault):
    """The database could not be reached (refused, gone, dropped the connection), did not answer
    within its bound, or had no pooled connection free in time: nothing was decided, and trying
    again shortly may succeed."""

    error_code = "DATABASE_UNAVAILABLE"
    title = "The database is unavailable; nothing changed. Try again shortly."
    retry_after = 5


class TransactionRolledBack(DatabaseUnavailable):
    """The server rolled the transaction back (a deadlock's victim, a serialization failure):
    nothing changed, and running it again may succeed (the money's retry loop does)."""


class CommitOutcomeUnknown(DatabaseFault):
    """The database became unavailable during the COMMIT of a write that has no Idempotency-Key
    to ask again (shared.db.uow.commit_unit): the server may have committed it, or not. Never
    "nothing changed", which is not known. A writer declares its own title, which says how the
    caller finds out or carries on safely; `driver_error` is the COMMIT's."""

    error_code = "COMMIT_OUTCOME_UNKNOWN"
    title = (
        "The database connection was lost while the change was committed, so whether it "
        "took effect is not known. Check before making it again."
    )
    retry_after = 5
