"""A candidate PIN or password can only be the secret when it has the secret's form
(docs/security.md#pins-and-passwords).

PBKDF2-HMAC pads a key shorter than the hash's block with zero bytes, so "4821\\0" derives the
same key as "4821": checked by the hash alone, a PIN with a trailing NUL (or any number of them)
verified as the PIN. A candidate that is not 4 to 6 ASCII digits can never be the PIN: it is a
wrong PIN (401 INVALID_PIN, an attempt spent like any wrong guess). A password holding a NUL is
refused as INVALID_PASSWORD without being verified. On SQLite and PostgreSQL (`db_url`)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.db.engine import get_engine
from shared.identity.passwords import hash_secret, verify_secret
from shared.identity.pins import InvalidPin, verify_pin
from shared.settings import PinSettings
from tests.support.clock import FakeClock
from tests.support.ids import readable
from tests.support.money import open_bank
from tests.support.users import FAST_HASH, PIN, pin_failures

SETTINGS = PinSettings(MaxFailedAttempts=5, LockoutMinutes=15)
PASSWORD = "correct horse battery staple"  # tests.support.make_user's default

# Each derives the same PBKDF2-HMAC key as PIN, or is otherwise not 4 to 6 ASCII digits.
NOT_A_PIN = [PIN + "\x00", PIN + "\x00\x00", "48\x0021", PIN + " ", "４８２１"]


def test_the_hash_alone_cannot_tell_a_trailing_nul_from_the_pin() -> None:
    # Why the format check is needed: HMAC's zero-padding of short keys.
    assert verify_secret(hash_secret(PIN, iterations=FAST_HASH), PIN + "\x00")


@pytest.mark.parametrize("candidate", NOT_A_PIN, ids=readable)
def test_a_candidate_that_is_not_four_to_six_ascii_digits_is_invalid_pin_and_spends_an_attempt(
    db_url: str, candidate: str
) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer()
    with pytest.raises(InvalidPin):
        verify_pin(get_engine(db_url), FakeClock(), SETTINGS, alice.user_id, candidate)
    assert pin_failures(db_url, alice.user_id) == 1


def _code(response: Any) -> tuple[int, str]:
    return response.status_code, response.json().get("errorCode")


def test_pin_change_with_a_nul_suffixed_current_pin_is_401_invalid_pin(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer()
        response = bank.client.put(
            "/api/pin",
            json={"currentPin": PIN + "\u0000", "newPin": "602817"},
            headers=bank.headers(alice),
        )
        assert _code(response) == (401, "INVALID_PIN")
        assert pin_failures(db_url, alice.user_id) == 1
        # The PIN is unchanged: the right one still works.
        right = bank.client.put(
            "/api/pin", json={"currentPin": PIN, "newPin": "602817"}, headers=bank.headers(alice)
        )
        assert right.status_code == 200, right.text


def test_the_mint_with_a_nul_suffixed_pin_is_401_invalid_pin(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=500), bank.customer()
        assert _code(bank.mint(alice, 100, bob, pin=PIN + "\u0000")) == (401, "INVALID_PIN")
        assert pin_failures(db_url, alice.user_id) == 1


def test_blank_is_still_pin_required_not_a_wrong_pin(db_url: str) -> None:
    with open_bank(db_url) as bank:
        alice, bob = bank.customer(balance=500), bank.customer()
        assert _code(bank.mint(alice, 100, bob, pin="  ")) == (422, "PIN_REQUIRED")
        assert pin_failures(db_url, alice.user_id) == 0


@pytest.mark.parametrize("password", [PASSWORD + "\u0000", PASSWORD + "\u0000\u0000"], ids=readable)
def test_a_password_holding_a_nul_is_401_invalid_password_and_enrols_nothing(
    db_url: str, password: str
) -> None:
    with open_bank(db_url) as bank:
        alice = bank.customer(pin=None)
        response = bank.client.post(
            "/api/pin", json={"password": password, "pin": PIN}, headers=bank.headers(alice)
        )
        assert _code(response) == (401, "INVALID_PASSWORD")
        # Nothing was enrolled: the right password still can.
        right = bank.client.post(
            "/api/pin", json={"password": PASSWORD, "pin": PIN}, headers=bank.headers(alice)
        )
        assert right.status_code == 201, right.text
