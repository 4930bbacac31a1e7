"""Contract audit, docs/http.md: no input ever produces a 500, on either dialect; a body too large
to be a request of this API is 400 VALIDATION_FAILED naming the body; a NUL in a payee tag or in a
token's subject (which PostgreSQL refuses to compare) is answered as SQLite answers it; money is
a JSON number with at most two decimals."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest

from api_funcs.middleware import MAX_BODY_BYTES
from tests.money_support import DEPOSIT, INTERNAL, MINT, TRANSFER, WITHDRAWAL, Bank, open_bank
from tests.support import SIGNING_KEY, unique_key

BODY_ROUTES = [
    ("POST", MINT),
    ("POST", TRANSFER),
    ("POST", INTERNAL),
    ("POST", DEPOSIT),
    ("POST", WITHDRAWAL),
    ("POST", "/api/pin"),
    ("PUT", "/api/pin"),
]


def _is_problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["errorCode"] == code
    assert {"type", "title", "status", "errorCode", "traceId"} <= body.keys()
    return body


@pytest.fixture
def bank(db_url: str) -> Iterator[Bank]:
    with open_bank(db_url) as opened:
        yield opened


# --- a body too large -------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_a_1mb_body_is_400_validation_failed_naming_the_body(
    sqlite_url: str, method: str, path: str
) -> None:
    """Every request of this API is a few hundred bytes; a megabyte is refused before it is
    parsed, instead of being read, decoded and validated (a cheap way to load the host)."""
    with open_bank(sqlite_url) as bank:
        alice = bank.customer(balance=10)
        body = {"accountId": str(alice.primary), "amount": 1, "padding": "a" * 1_000_000}
        response = bank.client.request(
            method,
            path,
            content=json.dumps(body),
            headers={
                **bank.headers(alice),
                "Idempotency-Key": unique_key(),
                "Content-Type": "application/json",
            },
        )
        problem = _is_problem(response, 400, "VALIDATION_FAILED")
        assert [e["field"] for e in problem["errors"]] == ["body"]
        assert str(MAX_BODY_BYTES) in problem["errors"][0]["message"]


def test_a_chunked_body_over_the_limit_is_refused_too(sqlite_url: str) -> None:
    """No Content-Length to trust: the limit counts what arrives."""

    def chunks() -> Iterator[bytes]:
        yield b'{"accountId": "' + str(uuid.uuid4()).encode() + b'", "amount": 1, "x": "'
        for _ in range(64):
            yield b"a" * 16_384
        yield b'"}'

    with open_bank(sqlite_url) as bank:
        alice = bank.customer()
        response = bank.client.post(
            DEPOSIT,
            content=chunks(),
            headers={
                **bank.headers(alice),
                "Idempotency-Key": unique_key(),
                "Content-Type": "application/json",
            },
        )
        _is_problem(response, 400, "VALIDATION_FAILED")


def test_a_body_at_the_limit_is_read_as_usual(sqlite_url: str) -> None:
    with open_bank(sqlite_url) as bank:
        alice = bank.customer(balance=10)
        prefix = json.dumps({"accountId": str(alice.primary), "amount": 1, "x": ""})[:-2]
        text = prefix + "a" * (MAX_BODY_BYTES - len(prefix) - 2) + '"}'
        assert len(text.encode()) == MAX_BODY_BYTES
        response = bank.client.post(
            DEPOSIT,
            content=text,
            headers={
                **bank.headers(alice),
                "Idempotency-Key": unique_key(),
                "Content-Type": "application/json",
            },
        )
        assert response.status_code == 201, response.text


# --- NUL where PostgreSQL cannot compare it ---------------------------------------------------


# A NUL in a payee tag is a body error (400 naming recipientAzureTag) before any lookup:
# tests/integration/http/test_nul_in_text_fields.py pins it on both dialects.


def test_a_token_whose_subject_holds_a_nul_is_401_on_every_dialect(bank: Bank) -> None:
    now = int(bank.clock.now().timestamp())
    claims = {
        "sub": "user\u0000id",
        "iss": "azurebank-local",
        "aud": "azurebank",
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    }
    token = jwt.encode(claims, SIGNING_KEY, algorithm="HS256")
    response = bank.client.get("/api/accounts", headers={"Authorization": f"Bearer {token}"})
    _is_problem(response, 401, "UNAUTHENTICATED")


# --- no input produces a 500 ------------------------------------------------------------------

RAW_BODIES = {
    "empty": b"",
    "array": b"[1, 2]",
    "null": b"null",
    "string": b'"hello"',
    "not json": b"hello",
    "bad utf-8": b'{"amount": "\xff\xfe"}',
    "1e400": b'{"accountId": "%s", "amount": 1e400}',
    "-1e400": b'{"accountId": "%s", "amount": -1e400}',
    "1e-400": b'{"accountId": "%s", "amount": 1e-400}',
    "NaN": b'{"accountId": "%s", "amount": NaN}',
    "Infinity": b'{"accountId": "%s", "amount": Infinity}',
    "5000 digits": b'{"accountId": "%s", "amount": ' + b"9" * 5000 + b"}",
    "nested arrays": b'{"accountId": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    "nested objects": b'{"a": ' * 20_000 + b"1" + b"}" * 20_000,
    "unicode tag": '{"accountId": "%s", "recipientAzureTag": "ñ\u202e😀", "amount": 1}'.encode(),
    "NUL everywhere": b'{"accountId": "%s", "recipientAzureTag": "a\\u0000", "amount": 1, '
    b'"pin": "12\\u00003", "password": "p\\u0000", "currentPin": "\\u0000", "newPin": "\\u0000", '
    b'"fromAccountId": "%s", "toAccountId": "%s", "authorizationId": "\\u0000"}',
    "lone surrogate": b'{"accountId": "%s", "recipientAzureTag": "\\ud800", "amount": 1}',
    "non-uuid ids": b'{"accountId": "x", "fromAccountId": 1, "toAccountId": [], "amount": 1}',
    "wrong types": b'{"accountId": {}, "amount": {}, "pin": 1234, "password": []}',
}


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_no_malformed_body_is_answered_with_a_500(bank: Bank, method: str, path: str) -> None:
    alice = bank.customer(balance=100, accounts=2)
    ids = (str(alice.account_ids[0]), str(alice.account_ids[1]))
    for name, raw in RAW_BODIES.items():
        body = raw.replace(b"%s", ids[0].encode(), 1).replace(b"%s", ids[1].encode())
        body = body.replace(b"%s", ids[0].encode())
        for content_type in ("application/json", "text/plain", None):
            headers = {**bank.headers(alice), "Idempotency-Key": unique_key()}
            if content_type:
                headers["Content-Type"] = content_type
            response = bank.client.request(method, path, content=body, headers=headers)
            assert response.status_code < 500, (name, content_type, response.text)
            assert response.headers["content-type"].startswith("application/")


BAD_HEADERS: dict[str, dict[str, str | bytes]] = {
    "no authorization": {"Authorization": ""},
    "basic": {"Authorization": "Basic dXNlcjpwYXNz"},
    "bearer only": {"Authorization": "Bearer"},
    "garbage token": {"Authorization": "Bearer a.b.c"},
    "latin-1 token": {"Authorization": b"Bearer \xe9\xe9"},
    "huge token": {"Authorization": "Bearer " + "a" * 60_000},
    "key of 256": {"Idempotency-Key": "k" * 256},
    "key of 8000": {"Idempotency-Key": "k" * 8000},
    "latin-1 key of 255": {"Idempotency-Key": b"\xe9" * 255},
    "control characters in key": {"Idempotency-Key": b"a\x01\x7fb"},
}


@pytest.mark.parametrize("name", list(BAD_HEADERS))
def test_no_header_is_answered_with_a_500(bank: Bank, name: str) -> None:
    alice = bank.customer(balance=100)
    body = {"accountId": str(alice.primary), "amount": 1}
    headers: dict[str, str | bytes] = {
        **bank.headers(alice),
        "Idempotency-Key": unique_key(),
        **BAD_HEADERS[name],
    }
    for method, path in [*BODY_ROUTES, ("GET", "/api/accounts")]:
        response = bank.client.request(method, path, json=body, headers=headers)
        assert response.status_code < 500, (method, path, response.text)


def test_the_longest_idempotency_key_is_stored_and_replayed(bank: Bank) -> None:
    """IdempotencyRecords.Key is 255 characters: a key of exactly 255 is a success and its
    replay, on both dialects. (Starlette decodes a header as latin-1, one character a byte; the
    test client re-encodes non-ASCII bytes, so a real server run checked 255 bytes of 0xE9.)"""
    alice = bank.customer(balance=100)
    body = {"accountId": str(alice.primary), "amount": 1}
    headers = {**bank.headers(alice), "Idempotency-Key": "k" * 255}
    first = bank.client.post(DEPOSIT, json=body, headers=headers)
    again = bank.client.post(DEPOSIT, json=body, headers=headers)
    assert first.status_code == again.status_code == 201, first.text
    assert again.headers["Idempotency-Replayed"] == "true"
    assert again.content == first.content


# --- money as a JSON number -------------------------------------------------------------------


def test_money_is_a_json_number_with_at_most_two_decimals(bank: Bank) -> None:
    alice = bank.customer(balance="10.10")
    accounts = bank.client.get("/api/accounts", headers=bank.headers(alice))
    assert '"balance":10.1' in accounts.text
    refused = bank.rail(DEPOSIT, alice, {"accountId": str(alice.primary), "amount": 0.005})
    problem = _is_problem(refused, 400, "VALIDATION_FAILED")
    assert [e["field"] for e in problem["errors"]] == ["amount"]
    done = bank.rail(DEPOSIT, alice, {"accountId": str(alice.primary), "amount": 0.9})
    assert done.status_code == 201, done.text
    assert '"amount":0.9,' in done.text and '"balance":11,' in done.text
