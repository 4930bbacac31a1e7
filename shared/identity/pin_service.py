"""PIN enrolment (behind the password) and change (behind the current PIN): the hash, the audit row
and the owed notice in one transaction (docs/security.md#the-step-up-pin-check)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import Engine, select, update

from shared.audit.chain import AuditAppender
from shared.clock import Clock
from shared.db.schema import AspNetUser, NoticeKind, SubscriberNotice
from shared.db.uow import commit_unit, rows_matched, unit_of_work, writing_unit_of_work
from shared.errors import Unauthenticated, ValidationFailed
from shared.identity.passwords import DEFAULT_ITERATIONS, hash_secret, verify_secret
from shared.identity.pins import is_valid_pin
from shared.identity.refusals import (
    InvalidPassword,
    PinAlreadyEnrolled,
    PinChangeOutcomeUnknown,
    PinEnrolmentOutcomeUnknown,
    PinRequired,
)
from shared.money.ports import PinCheck

PIN_FORMAT = "must be 4 to 6 digits (0-9)"


@dataclass(frozen=True)
class PinChanges:
    """PIN enrolment and change for one host: the unit-of-work boundary of both (they commit)."""

    engine: Engine
    clock: Clock
    audit: AuditAppender
    pins: PinCheck
    hash_iterations: int = field(default=DEFAULT_ITERATIONS, kw_only=True)

    def enrol(self, user_id: str, *, password: str, pin: str) -> uuid.UUID:
        """Enrol the caller's first PIN; return the audit row's Id. Rungs (docs/http.md): 401
        INVALID_PASSWORD · 409 PIN_ALREADY_ENROLLED · 400 VALIDATION_FAILED (the PIN's format)."""
        with unit_of_work(self.engine) as session:
            row = session.execute(
                select(AspNetUser.PasswordHash, AspNetUser.PinHash).where(AspNetUser.Id == user_id)
            ).first()
        if row is None:
            raise Unauthenticated
        password_hash, pin_hash = row
        # Never hashed: PBKDF2-HMAC pads a short key with zero bytes, so "secret\0" derives the
        # same key as "secret" (the .NET PasswordHasher too); no password we accept holds a NUL.
        if "\x00" in password or not verify_secret(password_hash, password):
            raise InvalidPassword
        if pin_hash is not None:
            raise PinAlreadyEnrolled
        if not is_valid_pin(pin):
            raise ValidationFailed("pin", PIN_FORMAT)
        return self._write(user_id, NoticeKind.PIN_ENROLLED, pin)

    def change(self, user_id: str, *, current_pin: str | None, new_pin: str) -> uuid.UUID:
        """Change the caller's PIN behind the current one (ADR-0047: repeatable); return the
        audit row's Id. Rungs: 422 PIN_REQUIRED · 429 PIN_LOCKED · 401 INVALID_PIN; a commit
        whose outcome is not known is 503 COMMIT_OUTCOME_UNKNOWN (the PIN check's, or this)."""
        if current_pin is None or not current_pin.strip():
            raise PinRequired
        # A malformed new PIN is refused before an attempt is spent on the current one.
        if not is_valid_pin(new_pin):
            raise ValidationFailed("newPin", PIN_FORMAT)
        self.pins(user_id, current_pin)
        return self._write(user_id, NoticeKind.PIN_CHANGED, new_pin)

    def _write(self, user_id: str, kind: NoticeKind, pin: str) -> uuid.UUID:
        """The new PIN's hash, its audit row and the owed notice naming that row, in one
        transaction that commits; hashed before it opens, so no lock waits on PBKDF2."""
        new_hash = hash_secret(pin, iterations=self.hash_iterations)
        enrolling = kind is NoticeKind.PIN_ENROLLED
        with writing_unit_of_work(self.engine) as session:
            now = self.clock.now()
            # append takes the chain's tail first (docs/architecture.md#lock-order).
            audit_id = self.audit.append(
                session, actor_user_id=user_id, event=kind.value, occurred_at=now
            )
            # An enrolment is conditional, so of two concurrent ones exactly one sets the PIN;
            # the other rolls back with its audit row.
            unenrolled = (AspNetUser.PinHash.is_(None),) if enrolling else ()
            written = rows_matched(
                session,
                update(AspNetUser)
                .where(AspNetUser.Id == user_id, *unenrolled)
                .values(PinHash=new_hash, PinAccessFailedCount=0, PinLockoutEnd=None)
                .execution_options(synchronize_session=False),
            )
            if enrolling and written != 1:
                raise PinAlreadyEnrolled
            # The notice names its audit row in the same unit of work (ADR-0052 D5).
            session.add(
                SubscriberNotice(
                    Id=uuid.uuid4(),
                    UserId=user_id,
                    Kind=kind.value,
                    CreatedAt=now,
                    AuditEventId=audit_id,
                )
            )
            commit_unit(
                session,
                unknown=PinEnrolmentOutcomeUnknown if enrolling else PinChangeOutcomeUnknown,
            )
        return audit_id
