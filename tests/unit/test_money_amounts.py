"""Money arrives as a JSON number with at most two decimals, above 0 and at most
100000 (ADR-0046), and is parsed as Decimal from the digits sent — never through a float."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from api_funcs.decimal_json import UNHOLDABLE, cents, dumps, loads_decimal
from api_funcs.schemas.fields import Money

MONEY = TypeAdapter(Money)


def _parse(text: str) -> Decimal:
    return MONEY.validate_python(loads_decimal(f'{{"amount": {text}}}')["amount"])


@given(st.decimals(min_value=Decimal("0.01"), max_value=Decimal(100000), places=2))
def test_every_two_decimal_amount_in_range_parses_to_exactly_its_digits(amount: Decimal) -> None:
    assert _parse(str(amount)) == amount
    assert cents(_parse(str(amount))) == amount


@given(
    st.decimals(min_value=Decimal("0.001"), max_value=Decimal(100000), places=6).filter(
        lambda d: d != d.quantize(Decimal("0.01"))
    )
)
def test_a_third_decimal_digit_is_refused(amount: Decimal) -> None:
    with pytest.raises(ValidationError):
        _parse(str(amount))


@pytest.mark.adr("0046")
@given(st.decimals(min_value=Decimal("100000.01"), max_value=Decimal(10) ** 20, places=2))
def test_above_the_published_maximum_is_refused(amount: Decimal) -> None:
    with pytest.raises(ValidationError):
        _parse(str(amount))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.1", Decimal("0.1")),
        ("0.2", Decimal("0.2")),
        ("0.30", Decimal("0.3")),
        ("1e2", Decimal(100)),
        ("1E-2", Decimal("0.01")),
        ("100000", Decimal(100000)),
        ("100000.00", Decimal(100000)),
        ("5000.01", Decimal("5000.01")),
    ],
)
def test_json_numbers_keep_their_exact_decimal_value(text: str, expected: Decimal) -> None:
    assert _parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "0.30000000000000004",  # 0.1 + 0.2 in binary: not an amount anyone typed
        "0.1000000000000000055511151231257827",  # float(0.1)'s exact value
        "0",
        "-0.01",
        "0.001",
        "100000.01",
        "1e400",
        # Past what a Decimal or an int can hold: refused as an amount, not a crash.
        "1e1000000000000000000",
        "-1e1000000000000000000",
        "9" * 5000,
        '"100"',  # a string is not a JSON number
        "true",
        "null",
        "NaN",
        "Infinity",
        "[1]",
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        _parse(text)


def test_unparsable_bodies_are_json_decode_errors_never_another_exception() -> None:
    for body in (b"nope", b"\xff\xfe", b"[" * 100_000, b'{"a": 1'):
        with pytest.raises(json.JSONDecodeError):
            loads_decimal(body)


@pytest.mark.parametrize("text", ["1e1000000000000000000", "-1E+1000000000000000000", "9" * 5000])
def test_a_number_no_decimal_or_int_can_hold_is_read_as_unholdable_not_a_whole_body_error(
    text: str,
) -> None:
    assert loads_decimal(f'{{"amount": {text}}}') == {"amount": UNHOLDABLE}


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        (Decimal("4000.0000"), "4000"),
        (Decimal("5000.0100"), "5000.01"),
        (Decimal("0.0000"), "0"),
        (Decimal("749.25"), "749.25"),
        (Decimal("99999.99"), "99999.99"),
        (Decimal("1E+2"), "100"),
        # Past a float's ~15 significant digits: a float wrote …98 and …94.
        (Decimal("99999999999999.99"), "99999999999999.99"),
        (Decimal("99999999999999.9300"), "99999999999999.93"),
    ],
)
def test_money_renders_as_a_json_number_with_every_digit_and_no_trailing_zeros(
    value: Decimal, rendered: str
) -> None:
    assert dumps(value) == rendered
    assert dumps({"balance": value}) == f'{{"balance":{rendered}}}'


@given(st.decimals(min_value=Decimal(-(10**14)) + 1, max_value=Decimal(10**14) - 1, places=4))
def test_every_numeric_18_4_value_round_trips_through_its_json_text(value: Decimal) -> None:
    text = dumps({"amount": value})
    assert json.loads(text, parse_float=Decimal, parse_int=Decimal)["amount"] == value


def test_everything_but_a_decimal_is_written_as_json_dumps_writes_it_compactly() -> None:
    value = {"a": [1, "é", None, True, 0.5], "b": {"c": "\u0000"}}
    assert dumps(value) == json.dumps(value, separators=(",", ":"))
    assert dumps(value, ensure_ascii=False) == json.dumps(
        value, separators=(",", ":"), ensure_ascii=False
    )
    with pytest.raises(ValueError):
        dumps(Decimal("NaN"))
