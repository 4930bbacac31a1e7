"""Identity's typed refusals: the PIN step-up's rungs and PIN enrolment's (docs/http.md). Titles
are safe to show anyone; the OpenAPI document is derived from these classes (shared.errors)."""

from __future__ import annotations

from shared.errors import CommitOutcomeUnknown, Conflict, Refusal, TooManyAttempts, Unauthenticated


class PinRequired(Refusal):
    error_code = "PIN_REQUIRED"
    title = "A PIN is required."


class PinNotEnrolled(PinRequired):
    """The caller has no PIN to check: the same rung, a title that says what to do."""

    title = "No PIN is enrolled; enrol one first."


class PinLocked(TooManyAttempts):
    error_code = "PIN_LOCKED"
    title = "Too many wrong PINs; the PIN is locked for now."
    # Retry-After is the whole seconds until PinLockoutEnd, set per refusal (`_locked`).
    sends = ("Retry-After",)


class InvalidPin(Unauthenticated):
    error_code = "INVALID_PIN"
    title = "The PIN is not correct."


class PinLockedOut(InvalidPin):
    """The wrong PIN that reached `Pin__MaxFailedAttempts`: the same answer as any wrong PIN (the
    caller learns nothing new), and the lockout starts now; an operator counts these."""


class InvalidPassword(Unauthenticated):
    error_code = "INVALID_PASSWORD"
    title = "The password is not correct."


class PinAlreadyEnrolled(Conflict):
    error_code = "PIN_ALREADY_ENROLLED"
    title = "A PIN is already enrolled; change it instead."


class PinAttemptOutcomeUnknown(CommitOutcomeUnknown):
    """The PIN check's own commit (the attempt reserved, or the count reset after the right PIN)
    lost its connection: the request went no further, and only the count is not known."""

    title = (
        "The database connection was lost while the PIN attempt was recorded, so whether it "
        "counts toward the lockout is not known; the request went no further. Try again."
    )


class PinEnrolmentOutcomeUnknown(CommitOutcomeUnknown):
    title = (
        "The database connection was lost while the PIN was enrolled, so whether it was "
        "enrolled is not known. Enrolling it again is safe: it answers that a PIN is already "
        "enrolled if this one was."
    )


class PinChangeOutcomeUnknown(CommitOutcomeUnknown):
    title = (
        "The database connection was lost while the new PIN was saved, so whether the PIN "
        "changed is not known. Try the new PIN: if it is accepted the change took effect, "
        "otherwise the current PIN still holds."
    )
