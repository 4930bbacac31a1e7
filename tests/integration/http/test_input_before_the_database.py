"""Bad input gets a clear answer, 400 VALIDATION_FAILED naming the field, never another
code or a 500; and no value reaches SQL that one of the three databases cannot store or compare
(api_funcs.schemas.fields, api_funcs.decimal_json). On SQLite and PostgreSQL (`db_url`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.ids import readable
from tests.support.money import (
    DEPOSIT,
    INTERNAL,
    MINT,
    TRANSFER,
    WITHDRAWAL,
    Bank,
    open_bank,
    unique_key,
)


@pytest.fixture
def bank(db_url: str) -> Iterator[Bank]:
    with open_bank(db_url) as opened:
        yield opened


def _named(response: Any) -> list[str]:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["errorCode"] == "VALIDATION_FAILED"
    return [e["field"] for e in problem["errors"]]


# JSON numbers no Decimal or int can hold: an exponent past the decimal module's limit (its
# construction raises decimal.InvalidOperation, an ArithmeticError, not a ValueError), and an
# integer past Python's 4300-digit limit.
UNHOLDABLE = {
    "1e1000000000000000000": b"1e1000000000000000000",
    "-1e1000000000000000000": b"-1e1000000000000000000",
    "1e-1000000000000000000": b"1e-1000000000000000000",
    "5000 digits": b"1" + b"0" * 4999,
    "5000 digits and a fraction": b"1" + b"0" * 4999 + b".5",
}


@pytest.mark.parametrize("path", [MINT, TRANSFER, INTERNAL, DEPOSIT, WITHDRAWAL])
@pytest.mark.parametrize("number", UNHOLDABLE.values(), ids=UNHOLDABLE.keys())
def test_a_number_no_decimal_can_hold_is_400_validation_failed_naming_amount(
    bank: Bank, path: str, number: bytes
) -> None:
    alice, bob = bank.customer(balance=100, accounts=2), bank.customer()
    fields = {
        "accountId": str(alice.account_ids[0]),
        "fromAccountId": str(alice.account_ids[0]),
        "toAccountId": str(alice.account_ids[1]),
        "recipientAzureTag": bob.tag,
        "pin": "4821",
    }
    raw = b'{"amount": ' + number + b", " + _members(fields) + b"}"
    headers = {
        **bank.headers(alice),
        "Idempotency-Key": unique_key(),
        "content-type": "application/json",
    }
    response = bank.client.post(path, content=raw, headers=headers)
    assert _named(response) == ["amount"]


def _members(fields: dict[str, str]) -> bytes:
    return ", ".join(f'"{name}": "{value}"' for name, value in fields.items()).encode()


@pytest.mark.parametrize(
    "key", [b"\x00", b"key\x00", b"\x00key", b"k" * 100 + b"\x00"], ids=readable
)
def test_an_idempotency_key_holding_a_nul_is_400_naming_the_header_and_moves_nothing(
    bank: Bank, key: bytes
) -> None:
    """PostgreSQL's text cannot hold a NUL: a key with one failed in the driver (500) there and
    was stored on SQLite. No key we keep holds one, on any database."""
    alice = bank.customer(balance=100)
    body = {"accountId": str(alice.primary), "amount": 1}
    headers = {**bank.headers(alice), "Idempotency-Key": key}
    response = bank.client.post(DEPOSIT, json=body, headers=headers)
    assert _named(response) == ["Idempotency-Key"]
    listed = bank.client.get("/api/accounts", headers=bank.headers(alice)).json()
    assert [a["balance"] for a in listed] == [100]


@pytest.mark.parametrize("path", [MINT, TRANSFER])
def test_a_payee_tag_past_its_column_in_utf16_units_is_400_naming_it(bank: Bank, path: str) -> None:
    """AspNetUsers.AzureTag is nvarchar(64) on SQL Server, 64 UTF-16 code units (.NET's count
    too): 33 emoji are 33 characters but 66 units, a tag no customer can have on any database."""
    alice = bank.customer(balance=100)
    body = {"accountId": str(alice.primary), "recipientAzureTag": "\U0001f600" * 33, "amount": 1}
    headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
    assert _named(bank.client.post(path, json=body, headers=headers)) == ["recipientAzureTag"]
