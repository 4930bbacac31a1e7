"""PIN enrolment's write, on SQLite and PostgreSQL: it sets the caller's PIN and nobody else's,
starts a clean count (whatever a removed PIN left behind), hashes at the iteration count the
service is given, and of two enrolments at once exactly one wins; a right PIN after a lapsed
lockout clears it; and on PostgreSQL a lockout's end is the UTC instant whatever time zone the
server's sessions run in."""

from __future__ import annotations

import base64
import struct
import threading
from datetime import timedelta

import pytest
from sqlalchemy import text, update

from shared.audit.chain import AuditChain
from shared.db.engine import dispose_engines, get_engine
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.identity.pin_service import PinChanges
from shared.identity.pins import InvalidPin, verify_pin
from shared.identity.refusals import PinAlreadyEnrolled
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.users import PASSWORD, make_user

PIN = "482193"
OTHER_PIN = "915372"
WRONG = "370615"
SETTINGS = PinSettings(MaxFailedAttempts=3, LockoutMinutes=15)


def _changes(url: str, clock: FakeClock) -> PinChanges:
    return PinChanges(get_engine(url), clock, AuditChain(b"k" * 32), lambda *_: None)


def _state(url: str, user_id: str) -> tuple[object, int, object]:
    with unit_of_work(get_engine(url)) as session:
        user = session.get_one(AspNetUser, user_id)
        return user.PinHash, user.PinAccessFailedCount, user.PinLockoutEnd


def test_enrolment_sets_the_callers_pin_and_nobody_elses(db_url: str) -> None:
    clock = FakeClock()
    caller, other = make_user(db_url).user_id, make_user(db_url).user_id
    _changes(db_url, clock).enrol(caller, password=PASSWORD, pin=PIN)
    verify_pin(get_engine(db_url), clock, SETTINGS, caller, PIN)
    assert _state(db_url, other) == (None, 0, None)


def test_enrolment_starts_a_clean_count_whatever_a_removed_pin_left(db_url: str) -> None:
    clock = FakeClock()
    caller = make_user(db_url).user_id
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(
            update(AspNetUser)
            .where(AspNetUser.Id == caller)
            .values(PinAccessFailedCount=2, PinLockoutEnd=clock.now() + timedelta(hours=1))
        )
        session.commit()
    _changes(db_url, clock).enrol(caller, password=PASSWORD, pin=PIN)
    assert _state(db_url, caller)[1:] == (0, None)
    verify_pin(get_engine(db_url), clock, SETTINGS, caller, PIN)


def test_enrolment_hashes_the_pin_at_the_iteration_count_the_service_is_given(
    db_url: str,
) -> None:
    clock, caller = FakeClock(), make_user(db_url).user_id
    changes = PinChanges(
        get_engine(db_url), clock, AuditChain(b"k" * 32), lambda *_: None, hash_iterations=7
    )
    changes.enrol(caller, password=PASSWORD, pin=PIN)
    pin_hash = _state(db_url, caller)[0]
    assert isinstance(pin_hash, str)
    # The V3 layout: format byte, PRF, then the iteration count (uint32, big-endian).
    assert struct.unpack(">I", base64.b64decode(pin_hash)[5:9]) == (7,)
    verify_pin(get_engine(db_url), clock, SETTINGS, caller, PIN)


def test_of_two_enrolments_at_once_exactly_one_sets_the_pin(db_url: str) -> None:
    # Each reads "no PIN yet", then hashes (PBKDF2 at its production cost) before it writes,
    # so both pass the read; the conditional write lets one through.
    clock, caller = FakeClock(), make_user(db_url).user_id
    changes = _changes(db_url, clock)
    barrier, outcomes = threading.Barrier(2), {}

    def enrol(pin: str) -> None:
        barrier.wait()
        try:
            changes.enrol(caller, password=PASSWORD, pin=pin)
            outcomes[pin] = "enrolled"
        except PinAlreadyEnrolled:
            outcomes[pin] = "refused"

    threads = [threading.Thread(target=enrol, args=(pin,)) for pin in (PIN, OTHER_PIN)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes.values()) == ["enrolled", "refused"], outcomes
    (winner,) = [pin for pin, outcome in outcomes.items() if outcome == "enrolled"]
    loser = OTHER_PIN if winner == PIN else PIN
    engine = get_engine(db_url)
    with pytest.raises(InvalidPin):
        verify_pin(engine, clock, SETTINGS, caller, loser)
    verify_pin(engine, clock, SETTINGS, caller, winner)


def test_the_right_pin_after_a_lapsed_lockout_clears_it(db_url: str) -> None:
    clock, caller = FakeClock(), make_user(db_url).user_id
    _changes(db_url, clock).enrol(caller, password=PASSWORD, pin=PIN)
    engine = get_engine(db_url)
    for _ in range(SETTINGS.MaxFailedAttempts):
        with pytest.raises(InvalidPin):
            verify_pin(engine, clock, SETTINGS, caller, WRONG)
    clock.advance(timedelta(minutes=SETTINGS.LockoutMinutes))
    verify_pin(engine, clock, SETTINGS, caller, PIN)
    assert _state(db_url, caller)[1:] == (0, None)


@pytest.mark.postgres
def test_a_lockout_ends_at_the_utc_instant_whatever_the_servers_time_zone(
    fresh_postgres_url: str,
) -> None:
    engine = get_engine(fresh_postgres_url)
    with engine.connect() as conn:
        name = conn.scalar(text("SELECT current_database()"))
        conn.execute(text(f"ALTER DATABASE \"{name}\" SET timezone TO 'America/New_York'"))
        conn.commit()
    dispose_engines()  # new sessions take the database's zone
    clock, caller = FakeClock(), make_user(fresh_postgres_url).user_id
    _changes(fresh_postgres_url, clock).enrol(caller, password=PASSWORD, pin=PIN)
    engine = get_engine(fresh_postgres_url)
    with engine.connect() as conn:
        assert conn.scalar(text("SHOW timezone")) == "America/New_York"
    for _ in range(SETTINGS.MaxFailedAttempts):
        with pytest.raises(InvalidPin):
            verify_pin(engine, clock, SETTINGS, caller, WRONG)
    assert _state(fresh_postgres_url, caller)[2] == clock.now() + timedelta(minutes=15)
