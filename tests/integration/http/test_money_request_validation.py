"""A malformed money request is 400 VALIDATION_FAILED naming the offending fields, never
a 500; and no PIN appears in a response body or a log line (ADR-0017)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from tests.support.money import DEPOSIT, INTERNAL, MINT, TRANSFER, WITHDRAWAL, open_bank, unique_key

GOOD = {
    "accountId": str(uuid.uuid4()),
    "recipientAzureTag": "someone",
    "amount": 10,
}


def _fields(response: Any) -> set[str]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["errorCode"] == "VALIDATION_FAILED"
    assert response.headers["content-type"] == "application/problem+json"
    return {e["field"] for e in body["errors"]}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": None}, "amount"),
        ({"amount": 0}, "amount"),
        ({"amount": -1}, "amount"),
        ({"amount": 0.001}, "amount"),
        ({"amount": 100000.01}, "amount"),
        ({"amount": 1e9}, "amount"),
        ({"amount": "10"}, "amount"),
        ({"amount": True}, "amount"),
        ({"accountId": "not-a-uuid"}, "accountId"),
        ({"recipientAzureTag": ""}, "recipientAzureTag"),
        ({"recipientAzureTag": "x" * 65}, "recipientAzureTag"),
    ],
)
@pytest.mark.parametrize("path", [MINT, TRANSFER])
def test_a_bad_field_is_400_naming_it(
    sqlite_url: str, path: str, change: dict[str, Any], field: str
) -> None:
    with open_bank(sqlite_url) as bank:
        alice = bank.customer()
        body = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        assert _fields(bank.client.post(path, json=body, headers=headers)) == {field}


@pytest.mark.parametrize("path", [MINT, TRANSFER, INTERNAL, DEPOSIT, WITHDRAWAL])
def test_missing_fields_are_named_and_non_json_is_the_body(sqlite_url: str, path: str) -> None:
    with open_bank(sqlite_url) as bank:
        alice = bank.customer()
        headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
        missing = _fields(bank.client.post(path, json={}, headers=headers))
        assert "amount" in missing
        for raw in (b"not json", b"[1, 2]", b'{"amount": 1', b"\xff"):
            response = bank.client.post(
                path, content=raw, headers={**headers, "content-type": "application/json"}
            )
            assert _fields(response) <= {"body"}, raw
        no_body = bank.client.post(path, headers=headers)
        assert no_body.status_code == 400


def test_no_pin_appears_in_any_response_or_log_line(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret_pins = ["987654", "55501"]
    with open_bank(sqlite_url) as bank:
        alice, bob = bank.customer(balance=100), bank.customer()
        bodies = [
            bank.mint(alice, 10, bob, pin=secret_pins[0]).text,  # wrong PIN: 401
            bank.mint(alice, 9999, bob, pin=secret_pins[1]).text,  # over the limit: 422
            bank.client.post(
                MINT,
                json={"accountId": "nope", "amount": "x", "pin": secret_pins[0]},
                headers=bank.headers(alice),
            ).text,  # validation: 400
        ]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for pin in secret_pins:
        assert all(pin not in body for body in bodies)
        assert pin not in logged
