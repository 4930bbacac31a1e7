"""The step-up PIN check of the mint and `PUT /api/pin`: its rungs, and the attempt reserved and
committed before the hash is checked (docs/security.md#the-step-up-pin-check)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import Engine, and_, case, literal, null, or_, select, update
from sqlalchemy.orm import Session

from shared.clock import Clock
from shared.db.schema import AspNetUser
from shared.db.types import UtcDateTime
from shared.db.uow import commit_unit, rows_matched, unit_of_work
from shared.errors import DomainError, Unauthenticated
from shared.identity.passwords import verify_secret
from shared.identity.refusals import (
    InvalidPin,
    PinAttemptOutcomeUnknown,
    PinLocked,
    PinLockedOut,
    PinNotEnrolled,
    PinRequired,
)
from shared.settings import PinSettings

# 4 to 6 ASCII digits (`[0-9]`, not `\d`, which matches other scripts' digits).
PIN_PATTERN = re.compile(r"[0-9]{4,6}")

SecretVerifier = Callable[[str | None, str], bool]


def is_valid_pin(pin: str) -> bool:
    return PIN_PATTERN.fullmatch(pin) is not None


def _locked(until: datetime, now: datetime) -> PinLocked:
    seconds = max(1, math.ceil((until - now).total_seconds()))
    return PinLocked(headers={"Retry-After": str(seconds)})


def verify_pin(
    engine: Engine,
    clock: Clock,
    pin_settings: PinSettings,
    user_id: str,
    pin: str | None,
    *,
    verifier: SecretVerifier = verify_secret,
) -> None:
    """Return when `pin` is the user's PIN; raise PinRequired, PinLocked or InvalidPin. Commits
    the reservation and, on success, the reset (either's outcome lost: PinAttemptOutcomeUnknown);
    `verifier` is the hash check (tests count it)."""
    if pin is None or not pin.strip():
        raise PinRequired
    now = clock.now()
    with unit_of_work(engine) as session:
        outcome = _reserve_attempt(session, pin_settings, user_id, now)
        # The reservation (or a lockout imposed) is committed even though the request may fail.
        commit_unit(session, unknown=PinAttemptOutcomeUnknown)
    if isinstance(outcome, DomainError):
        raise outcome
    pin_hash, locks = outcome
    # After the reservation, so a malformed guess spends an attempt like any wrong one; never
    # hashed, because HMAC's zero-padding makes "4821\0" verify as "4821".
    if not is_valid_pin(pin) or not verifier(pin_hash, pin):
        raise PinLockedOut if locks else InvalidPin
    with unit_of_work(engine) as session:
        session.execute(
            update(AspNetUser)
            .where(AspNetUser.Id == user_id)
            .values(PinAccessFailedCount=0, PinLockoutEnd=None)
        )
        commit_unit(session, unknown=PinAttemptOutcomeUnknown)


def _reserve_attempt(
    session: Session, pin_settings: PinSettings, user_id: str, now: datetime
) -> tuple[str, bool] | DomainError:
    """Count one attempt, atomically and only while below the limit; return the hash to check
    and whether this attempt imposed the lockout, or the rung that applies when no attempt may
    be made. Does not commit."""
    until = now + timedelta(minutes=pin_settings.LockoutMinutes)
    reserved = _count_attempt(session, pin_settings.MaxFailedAttempts, until, user_id, now)
    state = session.execute(
        select(AspNetUser.PinHash, AspNetUser.PinLockoutEnd).where(AspNetUser.Id == user_id)
    ).first()
    if state is None:
        return Unauthenticated()
    pin_hash, locked_until = state
    if reserved == 1 and pin_hash is not None:
        # A reservation is made only while unlocked, so a lockout end now is this attempt's.
        return str(pin_hash), locked_until is not None
    if pin_hash is None:
        return PinNotEnrolled()
    if locked_until is not None and locked_until > now:
        return _locked(locked_until, now)
    # At or above the limit with no lockout recorded (the limit was lowered, or another writer
    # left the row so): lock now rather than verify.
    session.execute(
        update(AspNetUser)
        .where(AspNetUser.Id == user_id, AspNetUser.PinLockoutEnd.is_(None))
        .values(PinLockoutEnd=until)
        .execution_options(synchronize_session=False)
    )
    return _locked(until, now)


def _count_attempt(
    session: Session, limit: int, until: datetime, user_id: str, now: datetime
) -> int:
    """Count one attempt, only while the user is below `limit` and unlocked (or the lockout
    has lapsed); the attempt that reaches the limit locks until `until`. Rows matched: 1 or 0."""
    count = AspNetUser.PinAccessFailedCount
    lockout_end = AspNetUser.PinLockoutEnd
    lapsed = and_(lockout_end.is_not(None), lockout_end <= now)
    # A lapsed lockout starts the count again: this attempt is the first of a new window.
    new_count = case((lapsed, 1), else_=count + 1)
    return rows_matched(
        session,
        update(AspNetUser)
        .where(
            AspNetUser.Id == user_id,
            AspNetUser.PinHash.is_not(None),
            or_(lapsed, and_(lockout_end.is_(None), count < limit)),
        )
        .values(
            PinAccessFailedCount=new_count,
            # The attempt that reaches the limit locks at once: while it is being verified no
            # other attempt may start, and if it is the right PIN the reset unlocks again.
            PinLockoutEnd=case((new_count >= limit, literal(until, UtcDateTime())), else_=null()),
        )
        .execution_options(synchronize_session=False),
    )
