"""A body that is not JSON is 400 VALIDATION_FAILED naming the body, on every
operation that takes one, never another code or a 500. (Found by the schemathesis run: the PIN
routes answered bytes that are not UTF-8 with FastAPI's generic 400 HTTP_ERROR, a code their
document does not declare, because only the money routes read bodies through
api_funcs.decimal_json.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_settings
from tests.support.tokens import bearer
from tests.support.users import make_user

# Every operation of docs/http.md with a request body.
WITH_A_BODY = [
    ("POST", "/api/pin"),
    ("PUT", "/api/pin"),
    ("POST", "/api/transactions/transfer/authorizations"),
    ("POST", "/api/transactions/transfer"),
    ("POST", "/api/transactions/internal-transfer"),
    ("POST", "/api/transactions/deposit"),
    ("POST", "/api/transactions/withdrawal"),
]
NOT_JSON = {
    "not UTF-8": b"\t\xff\x02\x05\xfe",
    "not JSON": b"password=x&pin=1234",
    "cut short": b'{"pin": "12',
    "nested past the recursion limit": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize(("method", "path"), WITH_A_BODY)
@pytest.mark.parametrize("raw", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_a_body_that_is_not_json_is_400_validation_failed_naming_the_body(
    sqlite_url: str, method: str, path: str, raw: bytes
) -> None:
    clock = FakeClock()
    user = make_user(sqlite_url, clock, accounts=1)
    headers = {
        **bearer(host_settings(sqlite_url), clock, user.user_id),
        "content-type": "application/json",
        "Idempotency-Key": "unparsable-body",
    }
    with api_client(sqlite_url, clock) as client:
        response = client.request(method, path, content=raw, headers=headers)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["errorCode"] == "VALIDATION_FAILED"
    assert [e["field"] for e in body["errors"]] == ["body"]
