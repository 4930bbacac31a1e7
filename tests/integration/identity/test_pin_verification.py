"""verify_pin, the step-up PIN check (docs/security.md#pins-and-passwords): its rungs, the durable
count, the lockout on the injected clock, and the reservation that caps concurrent guesses. The
control (`AZUREBANK_RUN_CONTROLS=1`) runs the concurrency test with a read-then-verify check."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import Engine, update

from shared.clock import Clock
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.errors import DomainError
from shared.identity.passwords import verify_secret
from shared.identity.pins import (
    InvalidPin,
    PinLocked,
    PinRequired,
    SecretVerifier,
    is_valid_pin,
    verify_pin,
)
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.leak_watch import LeakWatch
from tests.support.users import enrol_pin, make_user

RUN_CONTROLS = os.environ.get("AZUREBANK_RUN_CONTROLS") == "1"
# Six digits, so neither can turn up by chance in a timestamp or an id the leak watch reads.
PIN = "482193"
WRONG = "370615"
SETTINGS = PinSettings(MaxFailedAttempts=5, LockoutMinutes=15)


def _user_with_pin(url: str, pin: str | None = PIN) -> str:
    user = make_user(url)
    if pin is not None:
        enrol_pin(url, user.user_id, pin)
    return user.user_id


def _state(url: str, user_id: str) -> tuple[int, object]:
    with unit_of_work(get_engine(url)) as session:
        user = session.get_one(AspNetUser, user_id)
        return user.PinAccessFailedCount, user.PinLockoutEnd


class CountingVerifier:
    """The real hash check, counted (thread-safe), taking `seconds` as production PBKDF2 does
    (~0.1 s at 100,000 iterations) so that concurrent guesses overlap as they would there."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.calls = 0
        self._seconds = seconds
        self._lock = threading.Lock()

    def __call__(self, hashed: str | None, pin: str) -> bool:
        with self._lock:
            self.calls += 1
        time.sleep(self._seconds)
        return verify_secret(hashed, pin)


def _refusal(fn: Callable[[], None]) -> DomainError:
    with pytest.raises(DomainError) as caught:
        fn()
    error = caught.value
    # An error body is built from these: no PIN in any of them, so none reaches a body.
    said = f"{error} {error.title} {error.members} {error.headers}"
    assert PIN not in said and WRONG not in said
    return error


@pytest.mark.parametrize("pin", [None, "", "   "])
def test_an_absent_or_blank_pin_is_pin_required_and_counts_nothing(
    db_url: str, pin: str | None
) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    error = _refusal(lambda: verify_pin(get_engine(db_url), clock, SETTINGS, user_id, pin))
    assert isinstance(error, PinRequired) and error.status == 422
    assert _state(db_url, user_id) == (0, None)


def test_a_user_with_no_pin_enrolled_gets_pin_required_and_no_count(db_url: str) -> None:
    user_id, clock = _user_with_pin(db_url, pin=None), FakeClock()
    error = _refusal(lambda: verify_pin(get_engine(db_url), clock, SETTINGS, user_id, PIN))
    assert isinstance(error, PinRequired) and error.error_code == "PIN_REQUIRED"
    assert _state(db_url, user_id) == (0, None)


def test_a_wrong_pin_is_invalid_pin_and_its_count_is_committed(db_url: str) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    error = _refusal(lambda: verify_pin(get_engine(db_url), clock, SETTINGS, user_id, WRONG))
    assert isinstance(error, InvalidPin) and error.status == 401
    assert _state(db_url, user_id) == (1, None)  # durable although the request failed


def test_the_right_pin_passes_and_resets_the_count(db_url: str) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    engine = get_engine(db_url)
    for _ in range(3):
        _refusal(lambda: verify_pin(engine, clock, SETTINGS, user_id, WRONG))
    assert _state(db_url, user_id) == (3, None)
    verify_pin(engine, clock, SETTINGS, user_id, PIN)
    assert _state(db_url, user_id) == (0, None)


def test_five_wrong_pins_lock_and_the_sixth_right_pin_is_429_without_verifying_until_lockout_end(
    db_url: str, leak_watch: LeakWatch
) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    leak_watch.secret("PIN", PIN)
    leak_watch.secret("PIN", WRONG)
    leak_watch.start()
    engine, counted = get_engine(db_url), CountingVerifier()
    for _ in range(5):
        assert isinstance(
            _refusal(lambda: verify_pin(engine, clock, SETTINGS, user_id, WRONG, verifier=counted)),
            InvalidPin,
        )
    count, locked_until = _state(db_url, user_id)
    assert count == 5 and locked_until == clock.now() + timedelta(minutes=15)
    clock.advance(timedelta(minutes=5))
    sixth = _refusal(lambda: verify_pin(engine, clock, SETTINGS, user_id, PIN, verifier=counted))
    assert isinstance(sixth, PinLocked) and sixth.status == 429
    assert sixth.headers["Retry-After"] == str(10 * 60)
    assert counted.calls == 5  # the sixth was not verified
    clock.advance(timedelta(minutes=10))  # exactly PinLockoutEnd: the lockout has lapsed
    verify_pin(engine, clock, SETTINGS, user_id, PIN, verifier=counted)
    assert counted.calls == 6
    assert _state(db_url, user_id) == (0, None)
    leak_watch.assert_clean()


def test_a_wrong_pin_after_the_lockout_lapses_starts_a_new_count(db_url: str) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    engine = get_engine(db_url)
    for _ in range(5):
        _refusal(lambda: verify_pin(engine, clock, SETTINGS, user_id, WRONG))
    clock.advance(timedelta(minutes=16))
    assert isinstance(
        _refusal(lambda: verify_pin(engine, clock, SETTINGS, user_id, WRONG)), InvalidPin
    )
    assert _state(db_url, user_id) == (1, None)


def test_a_count_at_a_lowered_limit_with_no_lockout_locks_rather_than_verifies(
    db_url: str,
) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    with unit_of_work(get_engine(db_url)) as session:
        session.execute(
            update(AspNetUser).where(AspNetUser.Id == user_id).values(PinAccessFailedCount=3)
        )
        session.commit()
    counted = CountingVerifier()
    lowered = PinSettings(MaxFailedAttempts=3, LockoutMinutes=15)
    error = _refusal(
        lambda: verify_pin(get_engine(db_url), clock, lowered, user_id, PIN, verifier=counted)
    )
    assert isinstance(error, PinLocked) and counted.calls == 0
    assert _state(db_url, user_id) == (3, clock.now() + timedelta(minutes=15))


@pytest.mark.parametrize(
    ("pin", "valid"),
    [
        ("1234", True),
        ("123456", True),
        ("123", False),
        ("1234567", False),
        ("12a4", False),
        ("１２３４", False),
        ("1234\n", False),
        (" 1234", False),
        ("٣٤٥٦", False),
    ],
)
def test_a_pin_is_four_to_six_ascii_digits(pin: str, valid: bool) -> None:
    assert is_valid_pin(pin) is valid


# --- concurrency: the reservation caps verifications at the limit ----------------------------


def naive_verify_pin(
    engine: Engine,
    clock: Clock,
    settings: PinSettings,
    user_id: str,
    pin: str,
    *,
    verifier: SecretVerifier,
) -> None:
    """The control: read the count, verify, then count the failure (no reservation)."""
    with unit_of_work(engine) as session:
        user = session.get_one(AspNetUser, user_id)
        if user.PinAccessFailedCount >= settings.MaxFailedAttempts:
            raise PinLocked
        pin_hash = user.PinHash
    if not verifier(pin_hash, pin):
        with unit_of_work(engine) as session:
            session.execute(
                update(AspNetUser)
                .where(AspNetUser.Id == user_id)
                .values(PinAccessFailedCount=AspNetUser.PinAccessFailedCount + 1)
            )
            session.commit()
        raise InvalidPin


@pytest.mark.parametrize(
    "reserved",
    [
        pytest.param(True, id="reservation"),
        pytest.param(
            False,
            id="CONTROL-read-then-verify",
            marks=pytest.mark.skipif(not RUN_CONTROLS, reason="control: AZUREBANK_RUN_CONTROLS=1"),
        ),
    ],
)
def test_twenty_concurrent_wrong_pins_never_verify_more_than_the_limit_allows(
    db_url: str, reserved: bool, leak_watch: LeakWatch
) -> None:
    user_id, clock = _user_with_pin(db_url), FakeClock()
    leak_watch.secret("PIN", PIN)
    leak_watch.secret("PIN", WRONG)
    leak_watch.start()
    engine, counted = get_engine(db_url), CountingVerifier(seconds=0.05)
    start = threading.Barrier(20)
    outcomes: list[str] = []
    guard = threading.Lock()

    def guess() -> None:
        start.wait(timeout=60)
        check = verify_pin if reserved else naive_verify_pin
        try:
            check(engine, clock, SETTINGS, user_id, WRONG, verifier=counted)
            result = "passed"
        except DomainError as exc:
            result = exc.error_code
        with guard:
            outcomes.append(result)

    threads = [threading.Thread(target=guess) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(outcomes) == 20
    assert counted.calls <= SETTINGS.MaxFailedAttempts, f"{counted.calls} verifications ran"
    assert outcomes.count("INVALID_PIN") == counted.calls
    assert outcomes.count("PIN_LOCKED") == 20 - counted.calls
    count, locked_until = _state(db_url, user_id)
    assert count == SETTINGS.MaxFailedAttempts and locked_until is not None
    leak_watch.assert_clean()
