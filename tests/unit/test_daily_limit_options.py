"""ADR-0050 D6: DailyLimit__Amount (default 5,000, above 0 and below the per-request maximum
100,000) and DailyLimit__LockTimeoutSeconds (default 10, 1 to 29, below the 30 s command timeout),
validated at start with the operator's key and fix in the message."""

from __future__ import annotations

from decimal import Decimal

import pytest

from shared.settings import MONEY_MAX, SettingsError, load_settings


def test_the_defaults_are_5000_and_10_seconds() -> None:
    settings = load_settings({})
    assert settings.DailyLimit.Amount == Decimal(5000)
    assert settings.DailyLimit.LockTimeoutSeconds == 10
    assert settings.DailyLimit.Amount < MONEY_MAX  # a single transfer can never reach it fresh


@pytest.mark.parametrize("value", ["0.01", "750.5", "99999.99"])
def test_an_amount_above_zero_and_below_the_maximum_is_accepted(value: str) -> None:
    assert load_settings({"DailyLimit__Amount": value}).DailyLimit.Amount == Decimal(value)


@pytest.mark.parametrize("value", ["0", "-5", "100000", "250000", "5000.001", "lots"])
def test_an_amount_out_of_range_is_refused_naming_the_key_and_the_fix(value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"DailyLimit__Amount": value})
    message = str(refused.value)
    assert "DailyLimit__Amount" in message
    assert "set DailyLimit__Amount to a number above 0 and below 100000" in message


@pytest.mark.parametrize("value", ["1", "29"])
def test_a_lock_timeout_from_1_to_29_is_accepted(value: str) -> None:
    # 29 needs statements allowed longer than the lock wait (the rule below).
    environ = {"DailyLimit__LockTimeoutSeconds": value, "Database__StatementTimeoutSeconds": "30"}
    assert load_settings(environ).DailyLimit.LockTimeoutSeconds == int(value)


@pytest.mark.parametrize(
    ("key", "seconds"),
    [("DailyLimit__LockTimeoutSeconds", "15"), ("Database__LockTimeoutSeconds", "20")],
)
def test_a_lock_wait_not_below_the_statement_timeout_is_refused_naming_both_keys(
    key: str, seconds: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({key: seconds, "Database__StatementTimeoutSeconds": "15"})
    (problem,) = refused.value.problems
    assert problem.startswith(f"{key}: {seconds}s is not below Database__StatementTimeoutSeconds")
    assert "Fix:" in problem


@pytest.mark.parametrize("value", ["0", "30", "-1", "ten"])
def test_a_lock_timeout_outside_1_to_29_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"DailyLimit__LockTimeoutSeconds": value})
    assert "DailyLimit__LockTimeoutSeconds" in str(refused.value)
    assert "from 1 to 29" in str(refused.value)


def test_the_colon_spelling_of_the_keys_is_read_too() -> None:
    settings = load_settings({"DailyLimit:Amount": "1234", "DailyLimit:LockTimeoutSeconds": "3"})
    assert (settings.DailyLimit.Amount, settings.DailyLimit.LockTimeoutSeconds) == (
        Decimal(1234),
        3,
    )
