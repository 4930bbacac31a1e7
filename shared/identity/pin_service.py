"""PIN enrolment (behind the password) and change (behind the current PIN): docs/http.md,
docs/security.md.

Each writes, in ONE transaction, the PIN hash, an `AuditEvents` row (`PinEnrolled` /
`PinChanged`) and an owed `SubscriberNotices` row naming that audit row (ADR-0045: the row is
the obligation; ADR-0052 D5: the chain returns the Id it minted, so there is no second save).
Either all three commit or none does. PinChanges is the unit-of-work boundary: it commits.

Slow hashing (PBKDF2) happens outside the write transaction, so no lock (on SQLite, the
database's writer lock) is held while it runs.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from shared.audit.appender import AuditAppender
from shared.clock import Clock
from shared.db.schema import AspNetUser, NoticeKind, SubscriberNotice
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.db.writes import rows_matched
from shared.errors import Unauthenticated, ValidationFailed
from shared.identity.passwords import DEFAULT_ITERATIONS, hash_secret, verify_secret
from shared.identity.pins import is_valid_pin
from shared.identity.refusals import InvalidPassword, PinAlreadyEnrolled, PinRequired
from shared.money.ports import PinCheck

# The message a malformed PIN field is refused with (400 VALIDATION_FAILED).
PIN_FORMAT = "must be 4 to 6 digits (0-9)"


class PinChanges:
    """PIN enrolment and change for one host: the unit-of-work boundary of both (they commit)."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        audit: AuditAppender,
        pins: PinCheck,
        *,
        hash_iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._audit = audit
        self._pins = pins
        self._iterations = hash_iterations

    def enrol(self, user_id: str, *, password: str, pin: str) -> uuid.UUID:
        """Enrol the caller's first PIN; return the audit row's Id.

        Rungs in order (docs/http.md): 401 INVALID_PASSWORD · 409 PIN_ALREADY_ENROLLED · 400
        VALIDATION_FAILED (the PIN's format)."""
        with unit_of_work(self._engine) as session:
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
        new_hash = hash_secret(pin, iterations=self._iterations)
        with writing_unit_of_work(self._engine) as session:
            now = self._clock.now()
            # Lock order: tail → rows (the chain's docstring). append takes the tail first.
            audit_id = self._audit.append(
                session, actor_user_id=user_id, event=NoticeKind.PIN_ENROLLED.value, occurred_at=now
            )
            # Conditional, so of two concurrent enrolments exactly one sets the PIN; the other
            # rolls back with its audit row.
            written = rows_matched(
                session,
                update(AspNetUser)
                .where(AspNetUser.Id == user_id, AspNetUser.PinHash.is_(None))
                .values(PinHash=new_hash, PinAccessFailedCount=0, PinLockoutEnd=None)
                .execution_options(synchronize_session=False),
            )
            if written != 1:
                raise PinAlreadyEnrolled
            _owe_notice(session, user_id, NoticeKind.PIN_ENROLLED, now, audit_id)
            session.commit()
        return audit_id

    def change(self, user_id: str, *, current_pin: str | None, new_pin: str) -> uuid.UUID:
        """Change the caller's PIN behind the current one (ADR-0047: repeatable); return the
        audit row's Id. Rungs: 422 PIN_REQUIRED · 429 PIN_LOCKED · 401 INVALID_PIN."""
        if current_pin is None or not current_pin.strip():
            raise PinRequired
        # A malformed new PIN is refused before an attempt is spent on the current one.
        if not is_valid_pin(new_pin):
            raise ValidationFailed("newPin", PIN_FORMAT)
        self._pins(user_id, current_pin)
        new_hash = hash_secret(new_pin, iterations=self._iterations)
        with writing_unit_of_work(self._engine) as session:
            now = self._clock.now()
            audit_id = self._audit.append(
                session, actor_user_id=user_id, event=NoticeKind.PIN_CHANGED.value, occurred_at=now
            )
            session.execute(
                update(AspNetUser)
                .where(AspNetUser.Id == user_id)
                .values(PinHash=new_hash, PinAccessFailedCount=0, PinLockoutEnd=None)
                .execution_options(synchronize_session=False)
            )
            _owe_notice(session, user_id, NoticeKind.PIN_CHANGED, now, audit_id)
            session.commit()
        return audit_id


def _owe_notice(
    session: Session, user_id: str, kind: NoticeKind, now: datetime, audit_id: uuid.UUID
) -> None:
    # ADR-0052 D5: the notice names its audit row in the same unit of work.
    session.add(
        SubscriberNotice(
            Id=uuid.uuid4(), UserId=user_id, Kind=kind.value, CreatedAt=now, AuditEventId=audit_id
        )
    )
    session.flush()
