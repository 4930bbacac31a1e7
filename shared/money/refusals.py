"""The money path's typed refusals (docs/http.md). Titles are safe to show anyone; figures ride as
extension members and become JSON numbers in api_funcs (ADR-0050 D7). LOCK_TIMEOUT is
shared.errors'."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import ClassVar

from shared import errors
from shared.clock import utc_text


class AccountNotFound(errors.NotFound):
    error_code = "ACCOUNT_NOT_FOUND"
    title = "Account not found."


class AccountForbidden(errors.Forbidden):
    error_code = "ACCOUNT_FORBIDDEN"
    title = "The account belongs to someone else."


class PayeeNotFound(errors.NotFound):
    error_code = "PAYEE_NOT_FOUND"
    title = "No customer has that AzureTag."


class PayeeInvalid(errors.Refusal):
    error_code = "PAYEE_INVALID"
    title = "That payee cannot receive this transfer."


class AuthorizationRequired(errors.Unauthenticated):
    error_code = "AUTHORIZATION_REQUIRED"
    title = "A transfer authorization is required."


class AuthorizationExpired(errors.Unauthenticated):
    error_code = "AUTHORIZATION_EXPIRED"
    title = "The transfer authorization has expired."


class AuthorizationInvalid(errors.Unauthenticated):
    error_code = "AUTHORIZATION_INVALID"
    title = "The transfer authorization is not valid for this transfer."


class DailyLimitExceeded(errors.Refusal):
    """ADR-0050 D7: never `remaining`, which the client derives (it branches on errorCode)."""

    error_code = "DAILY_LIMIT_EXCEEDED"
    title = "Daily transfer limit exceeded."
    member_types: ClassVar[Mapping[str, errors.MemberType]] = {
        "limit": "number",
        "used": "number",
        "requested": "number",
        "resetsAt": "date-time",
    }
    never_members = ("remaining",)

    def __init__(
        self, *, limit: Decimal, used: Decimal, requested: Decimal, resets_at: datetime
    ) -> None:
        super().__init__(limit=limit, used=used, requested=requested, resetsAt=utc_text(resets_at))


class InsufficientFunds(errors.Refusal):
    error_code = "INSUFFICIENT_FUNDS"
    title = "Insufficient funds."
    member_types: ClassVar[Mapping[str, errors.MemberType]] = {
        "available": "number",
        "requested": "number",
    }

    def __init__(self, *, available: Decimal, requested: Decimal) -> None:
        super().__init__(available=available, requested=requested)


class ConcurrencyConflict(errors.Fault):
    error_code = "CONCURRENCY_CONFLICT"
    title = "The accounts were busy; nothing moved. Try again."
    retry_after = 1


class OutcomeUnknown(errors.Fault):
    """The commit lost its connection and the key could not be asked: never "nothing moved"."""

    error_code = "OUTCOME_UNKNOWN"
    title = (
        "The database connection was lost while the operation was committed, so whether it "
        "happened is not known. Retrying with the same Idempotency-Key is safe: it answers "
        "what happened."
    )
    retry_after = 5


class MintOutcomeUnknown(errors.CommitOutcomeUnknown):
    """A mint has no key to ask, and needs none: a second authorization moves nothing."""

    title = (
        "The database connection was lost while the transfer authorization was saved, so "
        "whether it was issued is not known. Minting a new one is safe: an authorization "
        "that is never used expires."
    )


class IdempotencyKeyReused(errors.Refusal):
    error_code = "IDEMPOTENCY_KEY_REUSED"
    title = "This Idempotency-Key was used with a different request."


class IdempotencyInProgress(errors.Conflict):
    error_code = "IDEMPOTENCY_IN_PROGRESS"
    title = "A request with this Idempotency-Key is still in progress."
    retry_after = 1


class IdempotencyKeyRequired(errors.BadRequest):
    error_code = "IDEMPOTENCY_KEY_REQUIRED"
    title = "Money operations require an Idempotency-Key header."
