"""No input ever produces a 500. PostgreSQL's text cannot hold a NUL character, so a
payee's AzureTag with one, looked up as sent, failed in the driver (500 on PostgreSQL, 404 on
SQLite). No customer can have such a tag, so the body refuses it: 400 VALIDATION_FAILED naming
the field, the same on every database, and the document's pattern says so."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.clock import FakeClock
from tests.support.hosts import api_client, host_settings
from tests.support.money import MINT, TRANSFER, unique_key
from tests.support.tokens import bearer
from tests.support.users import PIN, enrol_pin, make_user


@pytest.mark.parametrize("path", [MINT, TRANSFER])
@pytest.mark.parametrize("tag", ["\u0000", "payee\u0000", "\u0000payee"])
def test_a_payee_tag_holding_a_nul_is_400_naming_the_field_on_every_database(
    db_url: str, path: str, tag: str
) -> None:
    clock = FakeClock()
    user = make_user(db_url, clock, balance=100)
    enrol_pin(db_url, user.user_id)
    body = {
        "accountId": str(user.account_ids[0]),
        "recipientAzureTag": tag,
        "amount": 1,
        "pin": PIN,
        "authorizationId": str(uuid.uuid4()),
    }
    headers = {
        **bearer(host_settings(db_url), clock, user.user_id),
        "Idempotency-Key": unique_key(),
    }
    with api_client(db_url, clock) as client:
        response = client.post(path, json=body, headers=headers)
    assert response.status_code == 400
    problem: dict[str, Any] = response.json()
    assert problem["errorCode"] == "VALIDATION_FAILED"
    assert [e["field"] for e in problem["errors"]] == ["recipientAzureTag"]
