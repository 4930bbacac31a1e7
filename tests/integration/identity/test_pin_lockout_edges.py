"""The PIN check at the edges of its lockout, on SQLite and PostgreSQL: the Retry-After of a
lockout about to end, the one refusal that starts a lockout (operators count it), the right PIN on
the attempt that reaches the limit (it unlocks again at once), a lockout another writer recorded
below the limit, the limit lowered under a user already past it (and no one else locked with
them, and a lockout another writer records meanwhile kept), and a PIN change that clears an
attempt that landed during it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event, update

from shared.audit.chain import AuditChain
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.errors import ValidationFailed
from shared.identity.pin_service import PinChanges
from shared.identity.pins import InvalidPin, PinLocked, verify_pin
from shared.identity.refusals import PinLockedOut
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.users import enrol_pin, make_user

PIN = "482193"
WRONG = "370615"
NEW_PIN = "915372"
SETTINGS = PinSettings(MaxFailedAttempts=3, LockoutMinutes=15)
LOCKOUT = timedelta(minutes=15)


def _user(url: str) -> str:
    user = make_user(url)
    enrol_pin(url, user.user_id, PIN)
    return user.user_id


def _state(url: str, user_id: str) -> tuple[int, object]:
    with unit_of_work(get_engine(url)) as session:
        user = session.get_one(AspNetUser, user_id)
        return user.PinAccessFailedCount, user.PinLockoutEnd


def _set(url: str, user_id: str, **values: object) -> None:
    with unit_of_work(get_engine(url)) as session:
        session.execute(update(AspNetUser).where(AspNetUser.Id == user_id).values(**values))
        session.commit()


def _check(url: str, clock: FakeClock, user_id: str, pin: str) -> None:
    verify_pin(get_engine(url), clock, SETTINGS, user_id, pin)


def test_only_the_wrong_pin_that_reaches_the_limit_is_the_lockout(db_url: str) -> None:
    clock, user_id = FakeClock(), _user(db_url)
    for _ in range(SETTINGS.MaxFailedAttempts - 1):
        with pytest.raises(InvalidPin) as wrong:
            _check(db_url, clock, user_id, WRONG)
        assert not isinstance(wrong.value, PinLockedOut)
    with pytest.raises(PinLockedOut):
        _check(db_url, clock, user_id, WRONG)
    assert _state(db_url, user_id) == (SETTINGS.MaxFailedAttempts, clock.now() + LOCKOUT)


def test_the_right_pin_on_the_attempt_that_reaches_the_limit_unlocks_at_once(db_url: str) -> None:
    clock, user_id = FakeClock(), _user(db_url)
    for _ in range(SETTINGS.MaxFailedAttempts - 1):
        with pytest.raises(InvalidPin):
            _check(db_url, clock, user_id, WRONG)
    _check(db_url, clock, user_id, PIN)
    assert _state(db_url, user_id) == (0, None)
    _check(db_url, clock, user_id, PIN)


@pytest.mark.parametrize(
    ("left", "retry_after"),
    [(timedelta(milliseconds=400), "1"), (timedelta(seconds=1, milliseconds=500), "2")],
    ids=["under-a-second", "a-second-and-a-half"],
)
def test_retry_after_is_the_whole_seconds_left_rounded_up_and_never_zero(
    db_url: str, left: timedelta, retry_after: str
) -> None:
    clock, user_id = FakeClock(), _user(db_url)
    _set(db_url, user_id, PinAccessFailedCount=3, PinLockoutEnd=clock.now() + LOCKOUT)
    clock.advance(LOCKOUT - left)
    with pytest.raises(PinLocked) as locked:
        _check(db_url, clock, user_id, PIN)
    assert locked.value.headers["Retry-After"] == retry_after


def test_a_lockout_another_writer_recorded_holds_below_the_limit(db_url: str) -> None:
    """The API locks a user out without touching this count: the right PIN is still refused,
    and no attempt is spent."""
    clock, user_id = FakeClock(), _user(db_url)
    until = clock.now() + timedelta(minutes=5)
    _set(db_url, user_id, PinAccessFailedCount=0, PinLockoutEnd=until)
    with pytest.raises(PinLocked):
        _check(db_url, clock, user_id, PIN)
    assert _state(db_url, user_id) == (0, until)


def test_a_user_past_a_lowered_limit_is_locked_and_nobody_else_is(db_url: str) -> None:
    clock = FakeClock()
    past, other = _user(db_url), _user(db_url)
    _set(db_url, past, PinAccessFailedCount=5, PinLockoutEnd=None)  # the limit was 5
    with pytest.raises(PinLocked):
        _check(db_url, clock, past, PIN)
    assert _state(db_url, past) == (5, clock.now() + LOCKOUT)
    assert _state(db_url, other) == (0, None)
    _check(db_url, clock, other, PIN)


@pytest.mark.postgres
def test_a_lockout_another_writer_records_while_a_user_past_the_limit_is_refused_stands(
    fresh_postgres_url: str,
) -> None:
    """The check reads "past the limit, no lockout", then another writer (the API) records one
    before the check locks the user itself: the other writer's end is kept, not overwritten."""
    url, clock = fresh_postgres_url, FakeClock()
    user_id = _user(url)
    _set(url, user_id, PinAccessFailedCount=5, PinLockoutEnd=None)  # the limit was 5
    theirs = clock.now() + timedelta(hours=2)
    engine = get_engine(url)
    updates: list[str] = []

    def the_other_writer_before_the_second_update(
        _conn: object, _cursor: object, statement: str, *_: object
    ) -> None:
        if statement.lstrip().upper().startswith("UPDATE"):
            updates.append(statement)
            if len(updates) == 2:  # the check's count, then its own lockout
                _set(url, user_id, PinLockoutEnd=theirs)

    event.listen(engine, "before_cursor_execute", the_other_writer_before_the_second_update)
    try:
        with pytest.raises(PinLocked):
            _check(url, clock, user_id, PIN)
    finally:
        event.remove(engine, "before_cursor_execute", the_other_writer_before_the_second_update)
    assert len(updates) == 3  # the check's two and the other writer's
    assert _state(url, user_id) == (5, theirs)


class GuessDuringTheChange:
    """The current PIN's check, then wrong guesses that lock the PIN land before the change
    writes (another request of the caller's, racing it)."""

    def __init__(self, url: str, clock: FakeClock) -> None:
        self.url, self.clock = url, clock

    def __call__(self, user_id: str, pin: str | None) -> None:
        _check(self.url, self.clock, user_id, pin or "")
        for _ in range(SETTINGS.MaxFailedAttempts):
            with pytest.raises(InvalidPin):
                _check(self.url, self.clock, user_id, WRONG)


def test_a_pin_change_clears_the_attempts_and_the_lockout_that_landed_during_it(
    db_url: str,
) -> None:
    clock, user_id = FakeClock(), _user(db_url)
    engine = get_engine(db_url)
    changes = PinChanges(engine, clock, AuditChain(b"k" * 32), GuessDuringTheChange(db_url, clock))
    changes.change(user_id, current_pin=PIN, new_pin=NEW_PIN)
    assert _state(db_url, user_id) == (0, None)
    _check(db_url, clock, user_id, NEW_PIN)


def test_a_malformed_new_pin_is_refused_naming_the_field_and_the_rule(db_url: str) -> None:
    clock, user_id = FakeClock(), _user(db_url)
    changes = PinChanges(get_engine(db_url), clock, AuditChain(b"k" * 32), lambda *_: None)
    with pytest.raises(ValidationFailed) as refused:
        changes.change(user_id, current_pin=PIN, new_pin="12")
    assert refused.value.members == {
        "errors": [{"field": "newPin", "message": "must be 4 to 6 digits (0-9)"}]
    }
